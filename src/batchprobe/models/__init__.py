"""batchprobe.models"""
