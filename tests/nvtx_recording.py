"""A stand-in NVTX backend for tests: records every range pushed and popped, with its colour."""


class RecordingNvtx:
    def __init__(self):
        self.events = []  # ("start", message, colour, handle) and ("end", handle)
        self.next = 0

    def start_range(self, message, color):
        self.next += 1
        self.events.append(("start", message, color, self.next))
        return self.next

    def end_range(self, handle):
        self.events.append(("end", handle))

    def tree(self):
        return nesting(self.events)


def nesting(events):
    """Nesting as (depth, name) pairs, checking every range is closed in LIFO order."""
    stack, out = [], []
    for e in events:
        if e[0] == "start":
            out.append((len(stack), e[1]))
            stack.append(e[3])
        else:
            assert stack.pop() == e[1]
    assert not stack
    return out
