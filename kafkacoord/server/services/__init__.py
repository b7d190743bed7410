"""The daemon's long-running parts: controller election and hosting, group shard hosting."""
