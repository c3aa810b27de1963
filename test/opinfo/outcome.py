"""The result of one (op, dtype, mode) case, as the runner records it (one JSON line each)."""

import json
from dataclasses import asdict, dataclass, field


@dataclass
class Outcome:
    op: str
    dtype: str
    mode: str
    status: str  # pass | fail | skip
    kind: str = ""  # failure kind: value, dtype, shape, grad, structure, compile error,
    #                      runtime error, out-of-bounds, crash, timeout
    detail: str = ""
    sample: str = ""  # the failing sample
    samples: int = 0  # samples compared
    dropped: int = 0  # samples whose eager (or aot_eager) call fails
    fallbacks: list = field(default_factory=list)  # undeclared eager fallbacks in its graphs
    graphs: int = 0
    seconds: float = 0.0

    @property
    def key(self):
        return (self.op, self.dtype, self.mode)

    @property
    def native(self):
        return self.status == "pass" and not self.fallbacks

    def to_json(self):
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, line):
        return cls(**json.loads(line))
