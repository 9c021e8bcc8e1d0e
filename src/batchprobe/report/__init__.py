"""batchprobe.report"""
