"""What the long-running test targets share: announcing that they are ready."""
import os


def write_ready(path):
    """Writes our pid to path atomically (tmp + rename): a reader never sees it half-written."""
    with open(path + ".tmp", "w") as f:
        f.write("%d\n" % os.getpid())
    os.rename(path + ".tmp", path)
