"""Generated at build time from proto/grpc/voxgate.proto (setup.py); never edited by hand."""
