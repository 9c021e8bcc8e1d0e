"""batchprobe.bridge"""
