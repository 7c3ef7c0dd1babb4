"""Reading wheel indexes: pure page parsers (:mod:`~stacklock.index.pages`), an
HTTP/file client (:mod:`~stacklock.index.client`), a finder
(:mod:`~stacklock.index.finder`) and the page cache (:mod:`~stacklock.index.cache`).

Import from the module that defines a name: this package imports nothing, so
reading the page cache does not load the HTTP client.
"""
