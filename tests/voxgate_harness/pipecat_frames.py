"""A Pipecat processor for tests that notes the frames of the kinds it is asked about (needs the
SDK's [pipecat] extra)."""

from __future__ import annotations

from pipecat.frames.frames import Frame
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor


class Recorder(FrameProcessor):
    """Notes the frames of the kinds it is asked about, passes everything on."""

    def __init__(self, kinds: tuple[type[Frame], ...]) -> None:
        super().__init__()
        self.kinds = kinds
        self.seen: list[Frame] = []

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if isinstance(frame, self.kinds):
            self.seen.append(frame)
        await self.push_frame(frame, direction)
