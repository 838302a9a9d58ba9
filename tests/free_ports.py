"""Free TCP ports on loopback for tests that start servers (the hub uses three in a row)."""
import socket


def free_port_range(count: int) -> int:
    """A port p such that p .. p+count-1 are all free on 127.0.0.1 right now."""
    for _ in range(50):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            first = probe.getsockname()[1]
        if first + count > 65535:
            continue
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
