"""Pod admission results and the typed errors behind them (`pkg/kubelet/cm/admission/errors.go`).

An error with a type (TopologyAffinityError, SMTAlignmentError) becomes the admission reason and
its text the message; any other error from a hint provider's Allocate becomes
`UnexpectedAdmissionError` with the message "Allocate failed due to <error>, which is unexpected".
"""

from __future__ import annotations

from dataclasses import dataclass

UNEXPECTED = "UnexpectedAdmissionError"


class AdmissionError(Exception):
    """An error whose type kubelet reports as the admission reason."""

    reason = UNEXPECTED


class TopologyAffinityError(AdmissionError):
    reason = "TopologyAffinityError"

    def __init__(self):
        super().__init__("Resources cannot be allocated with Topology locality")


@dataclass(frozen=True)
class AdmitResult:
    admit: bool
    reason: str = ""
    message: str = ""

    def to_json(self) -> dict:
        return {"admit": self.admit, "reason": self.reason, "message": self.message}


def pod_admit_result(error: Exception | None) -> AdmitResult:
    """admission.GetPodAdmitResult."""
    if error is None:
        return AdmitResult(True)
    if isinstance(error, AdmissionError):
        return AdmitResult(False, error.reason, str(error))
    return AdmitResult(False, UNEXPECTED, f"Allocate failed due to {error}, which is unexpected")
