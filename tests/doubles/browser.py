"""A headless Debian chromium driven by selenium, for the page tests (report, viewer).

Installs the browser with ``scripts/install_browser.sh`` when it is missing; skips the calling
test when that cannot be done (no root, no archive). The flags keep chromium off the network.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--window-size=1300,1000",
)


def browser_paths() -> tuple[str, str]:
    chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if not (chromium and driver):
        try:
            subprocess.run(["bash", str(REPO / "scripts" / "install_browser.sh")], check=True, capture_output=True, timeout=600)
        except (subprocess.SubprocessError, OSError) as exc:
            detail = getattr(exc, "stderr", b"") or b""
            pytest.skip(f"chromium/chromedriver absent and scripts/install_browser.sh failed: {exc} {detail.decode()[-300:]}")
        chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if not (chromium and driver):
        pytest.skip("chromium/chromedriver still not on PATH after scripts/install_browser.sh")
    return chromium, driver


def start_chrome(profile_dir: Path):
    """A selenium Chrome driver with the browser console log enabled (``driver.get_log("browser")``)."""
    webdriver = pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.chrome.service import Service

    chromium, driver_path = browser_paths()
    opts = webdriver.ChromeOptions()
    opts.binary_location = chromium
    for flag in FLAGS:
        opts.add_argument(flag)
    opts.add_argument(f"--user-data-dir={profile_dir}")
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(driver_path), options=opts)
    driver.set_page_load_timeout(60)
    return driver
