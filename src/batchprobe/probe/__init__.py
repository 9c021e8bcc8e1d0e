"""batchprobe.probe"""
