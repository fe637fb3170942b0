import subprocess
import sys


def test_core_import_does_not_load_the_jupyter_layer():
    code = "import sys, fxviz; print('ipywidgets' in sys.modules, 'anywidget' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]
