"""batchprobe.fake"""
