"""Full-resolution logs off the worker: each finished seed's folder, packed, in an Optuna
artifact store named by the sweep file (``[study] artifacts``).

``artifacts = "/shared/spikebench-artifacts"`` is a :class:`FileSystemArtifactStore` on a
path every worker mounts; ``artifacts = "s3://bucket"`` a :class:`Boto3ArtifactStore`
(boto3 installed; credentials and ``AWS_ENDPOINT_URL`` for S3-compatible servers from the
environment, as boto3 reads them). Checkpoints stay on the worker: they are large and only
that worker resumes from them.
"""

from __future__ import annotations

import functools
import os
import tarfile
import tempfile
import uuid
from pathlib import Path
from typing import Any

from spikebench.errors import UserError
from spikebench.study import layout as L

# What a seed's archive holds: its logs, not its checkpoints.
PACKED = (L.CONFIG_JSON, L.META_JSON, L.METRICS, L.PARTIAL, L.SUMMARY_JSON, L.STDOUT, L.STDERR)


@functools.lru_cache(maxsize=8)
def open_store(where: str) -> Any:
    """The artifact store ``where`` names; a missing or unwritable one is one line. Opened
    (and probed) once per process: every trial of a worker uploads to the same store."""
    from optuna.artifacts import Boto3ArtifactStore, FileSystemArtifactStore

    if where.startswith("s3://"):
        bucket = where.removeprefix("s3://").strip("/")
        if not bucket or "/" in bucket:
            raise UserError(f"study.artifacts = {where!r}: give a bucket, s3://<bucket>")
        try:
            import boto3
        except ImportError:
            raise UserError(f"study.artifacts = {where!r}: needs boto3 (pip install "
                            "'spikebench[cluster]')") from None
        client = boto3.client("s3")
        try:
            client.head_bucket(Bucket=bucket)
        except Exception as e:  # noqa: BLE001 - botocore's errors vary
            first = (str(e).strip().splitlines() or [type(e).__name__])[0]
            raise UserError(f"study.artifacts = {where!r}: cannot reach the bucket "
                            f"({first})") from None
        return Boto3ArtifactStore(bucket, client=client)
    path = Path(where.removeprefix("file://"))
    if not path.is_absolute():
        raise UserError(f"study.artifacts = {where!r}: give an absolute path every worker "
                        "sees (a shared file system), or s3://<bucket>")
    if not path.is_dir():
        raise UserError(f"study.artifacts = {where!r}: no such folder (make it first, on "
                        "the shared file system)")
    probe = path / f".spikebench-probe-{uuid.uuid4().hex}"
    try:
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as e:
        raise UserError(f"study.artifacts = {where!r}: cannot be written "
                        f"({e.strerror or type(e).__name__})") from None
    return FileSystemArtifactStore(str(path))


def upload_seeds(trial: Any, store: Any, where: str, trial_dir: Path) -> dict[int, str]:
    """Pack and upload each seed folder of ``trial_dir``; ``{seed: where/artifact id}``."""
    from optuna.artifacts import upload_artifact

    out = {}
    for d in L.seed_dirs(trial_dir):
        fd, tmp = tempfile.mkstemp(prefix=f"{L.seed_name(L.seed_number(d) or 0)}-",
                                   suffix=".tar.gz")
        os.close(fd)
        try:
            with tarfile.open(tmp, "w:gz") as tar:
                for name in PACKED:
                    if (d / name).is_file():
                        tar.add(d / name, arcname=f"{d.name}/{name}")
            artifact = upload_artifact(artifact_store=store, file_path=tmp,
                                       study_or_trial=trial, mimetype="application/gzip")
        finally:
            Path(tmp).unlink(missing_ok=True)
        out[L.seed_number(d) or 0] = f"{where.rstrip('/')}/{artifact}"
    return out
