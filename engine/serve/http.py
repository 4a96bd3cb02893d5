"""uvicorn's httptools protocol with the two fixes a SPARQL GET needs.

1. ``httptools.parse_url`` keeps offsets in 16 bits, so uvicorn answered every request whose
   URL is over 65,535 bytes with ``400 Invalid HTTP request received.`` (measured: a 70 KB
   GET query). Such a URL is split here instead, so the application sees it and answers 414
   past ``--max-request-bytes`` (or runs the query when it is within the limit).
2. uvicorn collects a URL without bound; past the limit the client now gets **414** with the
   limit and the advice to POST at once, before the rest of the URL is read.

The limit comes from uvicorn's ``h11_max_incomplete_event_size`` (the same bound on the
request line that the h11 protocol applies), which ``kgengine serve`` sets from
``--max-request-bytes``; being a module-level class, it works with ``--http-processes``."""

from __future__ import annotations

from typing import Any

import httptools
from kgengine.serve.app import URL_HEADROOM, too_long_message
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

PARSE_URL_LIMIT = 0xFFFF  # httptools.parse_url's 16-bit offsets


class _URLTooLong(Exception):
    pass


class KGHttpToolsProtocol(HttpToolsProtocol):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._max_url = int(self.config.h11_max_incomplete_event_size or 2**20 + URL_HEADROOM)
        self._refused = False

    def on_url(self, url: bytes) -> None:
        super().on_url(url)
        if len(self.url) > self._max_url and not self._refused:
            self._refused = True
            body = too_long_message(max(self._max_url - URL_HEADROOM, 0)).encode()
            self.transport.write(b"HTTP/1.1 414 URI Too Long\r\ncontent-type: text/plain; charset=utf-8\r\n"
                                 b"connection: close\r\ncontent-length: " + str(len(body)).encode()
                                 + b"\r\n\r\n" + body)
            self.transport.close()
            raise _URLTooLong

    def data_received(self, data: bytes) -> None:  # uvicorn's, quiet about a refused URL
        if self._refused:
            return
        self._unset_keepalive_if_required()
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError:
            if self._refused:  # it has had its 414
                return
            self.logger.warning("Invalid HTTP request received.")
            self.send_400_response("Invalid HTTP request received.")
        except httptools.HttpParserUpgrade:
            if self._should_upgrade():
                self.handle_websocket_upgrade()
            else:
                self._unsupported_upgrade_warning()

    def on_headers_complete(self) -> None:
        url = self.url
        if len(url) <= PARSE_URL_LIMIT:
            super().on_headers_complete()
            return
        path, _, query = url.partition(b"?")
        self.url = path[:PARSE_URL_LIMIT]
        try:
            super().on_headers_complete()
        finally:
            self.url = url
        self.scope["query_string"] = query.partition(b"#")[0]
