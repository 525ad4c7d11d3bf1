# The one image of mpcoa: API, workers, beat (docker-compose.yml picks the command).
FROM python:3.11-slim-bookworm
RUN apt-get update \
 && apt-get install -y --no-install-recommends iproute2 procps iperf3 mptcpize \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY pyproject.toml README.md alembic.ini ./
COPY service service
COPY models models
COPY migrations migrations
COPY api api
COPY workers workers
COPY probes probes
COPY cli cli
RUN pip install --no-cache-dir . "celery[redis]>=5.3" "flower>=2.0"
RUN useradd --system --uid 10001 mpcoa
USER mpcoa
EXPOSE 8000
CMD ["mpcoa", "serve", "--host", "0.0.0.0", "--port", "8000"]
