"""A byte relay between a client and its base URL that keeps what went each way.

When a client fails, what it sent and what it got back (the proxy's answer, or the scripted
model's on a direct run) is the evidence. The relay copies bytes unchanged, one TCP
connection to the target per client connection, and writes each direction to its own file.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import threading
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Exchange:
    """One client connection: its requests' first lines and its responses' status lines."""

    number: int
    request: bytes
    response: bytes

    def request_lines(self) -> list[str]:
        return [m.decode(errors="replace") for m in _REQUEST_LINE.findall(self.request)]

    def statuses(self) -> list[int]:
        return [int(m) for m in _STATUS_LINE.findall(self.response)]

    def response_heads(self) -> list[list[tuple[str, str]]]:
        """Each response's header fields, names lowercased, in order."""
        heads = []
        for block in _HEAD.findall(self.response):
            fields = []
            for line in block.decode("latin-1").split("\r\n"):
                name, _, value = line.partition(":")
                fields.append((name.strip().lower(), value.strip()))
            heads.append(fields)
        return heads


_REQUEST_LINE = re.compile(rb"(?m)^(?:GET|POST|HEAD|PUT|DELETE|OPTIONS|PATCH) \S+ HTTP/1\.[01]")
_STATUS_LINE = re.compile(rb"(?m)^HTTP/1\.[01] (\d{3})")
_HEAD = re.compile(rb"(?m)^HTTP/1\.[01] \d{3}[^\r\n]*\r\n(.*?)\r\n\r\n", re.S)


class Tap:
    def __init__(self, target_port: int, folder: Path) -> None:
        self.target_port = target_port
        self.folder = folder
        self.folder.mkdir(parents=True, exist_ok=True)
        self.port = 0
        self._count = 0
        self._loop = asyncio.new_event_loop()
        self._started = threading.Event()
        self._thread = threading.Thread(target=self._run, name="client-tap", daemon=True)

    def __enter__(self) -> Tap:
        self._thread.start()
        if not self._started.wait(10):
            raise RuntimeError("the tap did not start")
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    async def _shutdown(self) -> None:
        # connections a client left open (keep-alive) end with the run
        current = asyncio.current_task()
        pending = [task for task in asyncio.all_tasks() if task is not current]
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(asyncio.start_server(self._serve, "127.0.0.1", 0))
        self.port = server.sockets[0].getsockname()[1]
        self._started.set()
        self._loop.run_forever()
        server.close()
        self._loop.run_until_complete(server.wait_closed())

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._count += 1
        number = self._count
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError as error:
            (self.folder / f"{number:03d}.error").write_text(str(error))
            writer.close()
            return
        with (
            (self.folder / f"{number:03d}.request").open("wb") as sent,
            (self.folder / f"{number:03d}.response").open("wb") as got,
        ):
            try:
                await asyncio.gather(
                    self._pipe(reader, up_writer, sent), self._pipe(up_reader, writer, got)
                )
            except asyncio.CancelledError:
                pass  # the run is over; a kept-alive connection ends with it
            finally:
                writer.close()
                up_writer.close()

    @staticmethod
    async def _pipe(
        reader: asyncio.StreamReader, writer: asyncio.StreamWriter, copy: object
    ) -> None:
        try:
            while data := await reader.read(65536):
                copy.write(data)  # type: ignore[attr-defined]
                copy.flush()  # type: ignore[attr-defined]
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            with contextlib.suppress(ConnectionError, OSError, RuntimeError):
                writer.write_eof() if writer.can_write_eof() else writer.close()

    def exchanges(self) -> list[Exchange]:
        found = []
        for path in sorted(self.folder.glob("*.request")):
            number = int(path.stem)
            response = path.with_suffix(".response")
            found.append(
                Exchange(
                    number,
                    path.read_bytes(),
                    response.read_bytes() if response.exists() else b"",
                )
            )
        return found
