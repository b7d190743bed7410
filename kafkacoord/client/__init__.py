"""Client libraries: a consumer-group member and a group admin client."""

from .group_admin import GroupAdmin
from .group_member import CommitFailedError, GroupMember

__all__ = ["CommitFailedError", "GroupAdmin", "GroupMember"]
