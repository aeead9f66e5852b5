"""Helpers the tests import (and tests/helpers/ddp_driver.py, a script test_ddp.py runs): not tests themselves."""
