"""The client rebuilds a model with bytes from its wire form (``engine.service.wire``): text as its UTF-8
bytes, content that is not UTF-8 from its ``{"$base64": ...}`` marker, so ``read_artifact`` of a binary
artifact answers the same model in the CLI's client mode as in process (it raised a ValidationError)."""

from __future__ import annotations

import hashlib

from engine.client.http import rebuilt
from engine.models.artifacts import ArtifactContent, ArtifactVersion
from engine.service.wire import model_name, to_wire


def content(data: bytes) -> ArtifactContent:
    version = ArtifactVersion(artifact_id="art_1", version=1, checksum=hashlib.sha256(data).hexdigest(),
                              size=len(data), location="cas/x", created_by="alice", created_at_us=1)
    return ArtifactContent(artifact=version, content=data)


def test_binary_and_text_content_come_back_as_sent() -> None:
    for data in (b"\xff\x00\xfe binary", "plain text \u00e9".encode()):
        model = content(data)
        assert rebuilt(to_wire(model), model_name(model)) == model
        assert rebuilt([to_wire(model)], model_name([model])) == [model]
