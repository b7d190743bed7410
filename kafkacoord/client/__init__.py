"""Client libraries: consumer-group members and a group admin client."""

from .classic_member import ClassicProtocolMember
from .consumer_member import ConsumerProtocolMember
from .group_admin import GroupAdmin
from .group_member import CommitFailedError, GroupMember
from .members import group_member

__all__ = [
    "ClassicProtocolMember",
    "CommitFailedError",
    "ConsumerProtocolMember",
    "GroupAdmin",
    "GroupMember",
    "group_member",
]
