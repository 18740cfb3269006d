"""Small fluent builders for quota documents (in the spirit of Kueue's utiltesting wrappers).

doc = DocBuilder("ml-training").env(**{"ml.g5.xlarge": 3}).share("team-a", **{"ml.g5.xlarge": 1})
raw = doc.build()   # a plain dict, as YAML would give
"""

from __future__ import annotations

import copy
from typing import Any


class ShareBuilder:
    def __init__(self, name: str, limits: dict[str, int]):
        self.raw: dict[str, Any] = {
            "quotaShareName": name,
            "capacityLimits": [{"capacityUnit": u, "maxCapacity": m} for u, m in limits.items()],
            "resourceSharingConfiguration": {"strategy": "RESERVE"},
            "preemptionConfiguration": {"inSharePreemption": "DISABLED"},
        }

    def strategy(self, strategy: str, borrow_limit: int | None = None) -> ShareBuilder:
        cfg: dict[str, Any] = {"strategy": strategy}
        if borrow_limit is not None:
            cfg["borrowLimit"] = borrow_limit
        self.raw["resourceSharingConfiguration"] = cfg
        return self

    def in_share_preemption(self, value: str = "ENABLED") -> ShareBuilder:
        self.raw["preemptionConfiguration"] = {"inSharePreemption": value}
        return self

    def set(self, **fields: Any) -> ShareBuilder:
        self.raw.update(fields)
        return self


class DocBuilder:
    def __init__(self, queue: str = "ml-training"):
        self.raw: dict[str, Any] = {
            "jobQueue": {"jobQueueName": queue},
            "serviceEnvironment": {"capacityLimits": []},
            "quotaShares": [],
        }

    def env(self, **limits: int) -> DocBuilder:
        self.raw["serviceEnvironment"]["capacityLimits"] = [
            {"capacityUnit": u, "maxCapacity": m} for u, m in limits.items()
        ]
        return self

    def queue(self, **fields: Any) -> DocBuilder:
        self.raw["jobQueue"].update(fields)
        return self

    def share(
        self, name: str, strategy: str = "RESERVE", borrow_limit: int | None = None, **limits: int
    ) -> DocBuilder:
        self.raw["quotaShares"].append(
            ShareBuilder(name, limits).strategy(strategy, borrow_limit).raw
        )
        return self

    def add(self, share: ShareBuilder) -> DocBuilder:
        self.raw["quotaShares"].append(share.raw)
        return self

    def set(self, **fields: Any) -> DocBuilder:
        self.raw.update(fields)
        return self

    def build(self) -> dict[str, Any]:
        return copy.deepcopy(self.raw)


def g5(n: int) -> dict[str, int]:
    """Shorthand for limits of n x ml.g5.xlarge."""
    return {"ml.g5.xlarge": n}


def guide_layout() -> DocBuilder:
    """The AWS guide's layout: environment of 3 x ml.g5.xlarge, three shares of one each."""
    return (
        DocBuilder("ml-training")
        .env(**g5(3))
        .share("team-a", "LEND_AND_BORROW", 100, **g5(1))
        .share("team-b", "LEND_AND_BORROW", 100, **g5(1))
        .share("team-c", "LEND", **g5(1))
    )
