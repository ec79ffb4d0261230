"""Stand-in for ansible-test's pip bootstrap script (get-pip.py), which it downloads from a host
this project cannot reach. ansible-test runs it inside a fresh virtualenv with pip's arguments
(``--disable-pip-version-check pip==X setuptools==Y ...``); Python's own ensurepip gives the
virtualenv a pip, which then installs exactly the versions asked for from the package index.
"""
import subprocess
import sys

subprocess.check_call([sys.executable, "-m", "ensurepip", "--upgrade"], stdout=subprocess.DEVNULL)
options = [arg for arg in sys.argv[1:] if arg not in ("--no-setuptools", "--no-wheel")]
subprocess.check_call([sys.executable, "-m", "pip", "install", "-q", *options])
