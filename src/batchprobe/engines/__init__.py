"""batchprobe.engines"""
