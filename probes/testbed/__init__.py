"""The emulated testbed: network namespaces, links, delay line, field conditions."""
