"""Free TCP ports on loopback for tests that start servers (the hub uses three in a row)."""
import random
import socket

from course_lib.parallel.launch import ephemeral_ports


def free_port_range(count: int) -> int:
    """A port p such that p .. p+count-1 are all free on 127.0.0.1 right now, chosen below the
    range the OS hands out for port 0: the gloo connections of tests running beside this one
    bind such ports, and could take one before the server that waits for it starts."""
    low, _ = ephemeral_ports()
    top = low - count if low > 11_000 else 65_536 - count
    for _ in range(200):
        first = random.randrange(10_000 if low > 11_000 else low, top)
        holders = []
        try:
            for port in range(first, first + count):
                holder = socket.socket()
                holders.append(holder)
                holder.bind(("127.0.0.1", port))
            return first
        except OSError:
            continue
        finally:
            for holder in holders:
                holder.close()
    raise RuntimeError(f"no {count} free ports in a row on 127.0.0.1")
