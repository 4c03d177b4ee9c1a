"""The documentation site: Sphinx with MyST Markdown (``./dev docs``).

Built with ``-W`` (``./dev docs build``, CI): a link to a page that does not
exist, to an anchor no heading or label makes, or a page no table of contents
lists fails the build. Nothing is fetched from the network, at build or view
time: furo ships its assets, and the site has no external extension.
"""

project = "delivery_pipeline"
author = "delivery_pipeline's developers"
extensions = ["myst_parser"]
source_suffix = {".md": "markdown"}
root_doc = "index"
# docs/incoming/: texts other changes bring, placed in the site by whoever merges them.
exclude_patterns = ["_build", "incoming", "screenshots/*.py", "**/.*"]

# Every heading down to ### is a link target (`page.md#its-slug`), and a link to
# one that does not exist is an error.
myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence", "deflist"]
nitpicky = True

html_theme = "furo"
html_title = "delivery_pipeline"
html_static_path: list[str] = []
html_show_sourcelink = False
html_copy_source = False
