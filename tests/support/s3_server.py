"""An S3-compatible server on loopback for tests: moto's server (``moto[server]``), not a mock of a client.

with S3Server() as s3:
    store = ArtifactStore.open(f"s3://{s3.bucket}/prefix", **s3.config)
"""

from __future__ import annotations

import uuid
from types import TracebackType
from typing import Any

import boto3
from moto.server import ThreadedMotoServer

KEYS = {"access_key_id": "test", "secret_access_key": "test", "region": "us-east-1"}


class S3Server:
    """Starts moto's S3 server on a free loopback port and makes one bucket.

    moto keeps its buckets in the process, shared by every server it starts: each server gets a
    bucket of its own, so one test never lists another's objects.
    """

    def __init__(self, bucket: str | None = None) -> None:
        self.bucket = bucket or f"chamvi-artifacts-{uuid.uuid4().hex[:12]}"
        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self.endpoint = ""

    @property
    def config(self) -> dict[str, Any]:
        """What ``ArtifactStore.open`` needs besides the URL: the endpoint and the credentials."""
        return {"endpoint": self.endpoint, **KEYS}

    def keys(self) -> list[str]:
        """Every object key in the bucket, read with another client than the one under test."""
        listed = self._client().list_objects_v2(Bucket=self.bucket)
        return sorted(item["Key"] for item in listed.get("Contents", []))

    def _client(self) -> Any:
        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=KEYS["access_key_id"],
            aws_secret_access_key=KEYS["secret_access_key"],
            region_name=KEYS["region"],
        )

    def __enter__(self) -> S3Server:
        self._server.start()
        host, port = self._server.get_host_and_port()
        self.endpoint = f"http://{host}:{port}"
        self._client().create_bucket(Bucket=self.bucket)
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self._server.stop()
