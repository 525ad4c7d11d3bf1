# The one image of mpcoa: API, workers, beat (docker-compose.yml picks the command).
FROM python:3.11-slim-bookworm
# Probe tools, and the BPF toolchain a site worker compiles and registers its congestion
# controls with (probes/bpf/src: clang, bpftool, libbpf's headers); the same list as
# scripts/debian-packages.txt's for the product (not its tests').
RUN apt-get update \
 && apt-get install -y --no-install-recommends iproute2 procps kmod iperf3 mptcpize \
      clang bpftool libbpf-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY pyproject.toml README.md alembic.ini constraints.txt ./
COPY service service
COPY models models
COPY migrations migrations
COPY api api
COPY workers workers
COPY probes probes
COPY cli cli
# Every package, Celery's and Flower's included, at the version constraints.txt pins.
RUN pip install --no-cache-dir -c constraints.txt ".[flower]"
# The control host's services run unprivileged; docker-compose.yml's site-worker runs as root
# with the capabilities it lists (it writes the host's sysctls and registers BPF controls).
RUN useradd --system --uid 10001 mpcoa
USER mpcoa
EXPOSE 8000
CMD ["mpcoa", "serve", "--host", "0.0.0.0", "--port", "8000"]
