"""batchprobe.results"""
