"""Read ``kafka-acls.sh --add`` command lines back into ACLs, as Kafka's tool would."""

from __future__ import annotations

import shlex
from collections.abc import Iterable

from kafkacoord.storage.acls import Acl, Resource

_RESOURCE_FLAGS = {f"--{r.value}": r for r in Resource if r is not Resource.CLUSTER}


def parse_commands(lines: Iterable[str]) -> set[Acl]:
    """The ACLs the ``--add`` lines grant; anything but allow ACLs from any host fails."""
    acls: set[Acl] = set()
    for line in lines:
        args = shlex.split(line)
        assert args[0] == "kafka-acls.sh" and "--add" in args, line
        principals, operations = [], []
        resource, name, prefixed = None, "", False
        it = iter(args[1:])
        for arg in it:
            if arg == "--allow-principal":
                principals.append(next(it))
            elif arg == "--operation":
                operations.append(next(it))
            elif arg in _RESOURCE_FLAGS:
                resource, name = _RESOURCE_FLAGS[arg], next(it)
            elif arg == "--cluster":
                resource, name = Resource.CLUSTER, "kafka-cluster"
            elif arg == "--resource-pattern-type":
                prefixed = {"prefixed": True, "literal": False}[next(it)]
            elif arg in ("--bootstrap-server", "--command-config"):
                next(it)
            else:
                assert arg == "--add", f"unexpected {arg!r} in {line}"
        assert resource is not None and principals and operations, line
        acls |= {Acl(p, resource, name, prefixed, op) for p in principals for op in operations}
    return acls
