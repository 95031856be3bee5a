"""The Qt parts of ``specviz bench``: the chart, its options, the window's own speed."""
