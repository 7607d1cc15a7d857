"""Storm multilang components: spouts and bolts in any language, as subprocesses speaking
Storm's multilang protocol (docs/coming-from.md, "Storm multilang").

Example:
    >>> from jstormpy.multilang import ShellBolt, ShellSpout
    >>> ShellBolt(["python3", "split.py"], outputs=("word",)).outputs
    ('word',)
"""

from jstormpy.multilang.bolt import ShellBolt
from jstormpy.multilang.spout import ShellSpout

__all__ = ["ShellBolt", "ShellSpout"]
