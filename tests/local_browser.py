"""What the browser tests share: Debian's Chromium (skipped where it is absent, with the reason) and pages that may
reach this machine only, every request elsewhere aborted and recorded in `page.outside`."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlparse

import pytest

__all__ = ["CHROMIUM", "NEEDS_CHROMIUM", "local_only_page"]

CHROMIUM = Path("/usr/bin/chromium")
LOCAL_HOSTS = {"127.0.0.1", "localhost"}
LOCAL_SCHEMES = {"file", "data", "blob"}
NEEDS_CHROMIUM = pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's Chromium at /usr/bin/chromium "
                                                                  "(apt-get install chromium; .ci/run installs it)")


def local_only_page(browser, width: int, height: int):
    """A page of `width` x `height` px in a context of its own (close it with `page.context.close()`) whose requests
    to any other host are aborted and recorded in `page.outside`."""
    context = browser.new_context(viewport={"width": width, "height": height})
    outside: list[str] = []

    def only_local(route):
        url = urlparse(route.request.url)
        if url.scheme in LOCAL_SCHEMES or url.hostname in LOCAL_HOSTS:
            route.continue_()
        else:
            outside.append(route.request.url)
            route.abort()

    context.route("**/*", only_local)
    page = context.new_page()
    page.outside = outside
    return page
