"""batchprobe.patches"""
