"""ExecuTorch backend-options hardware-in-the-loop harness."""
