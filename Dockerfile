# vigil: multi-stage build. The runtime image has no compiler, runs as a non-root user, and keeps
# all state (runner_state.json, logs/, heartbeat, models/) on the /data volume.

FROM python:3.11-slim AS build
WORKDIR /src
RUN pip install --no-cache-dir --upgrade pip wheel
COPY pyproject.toml README.md ./
COPY core core
COPY runner runner
COPY market market
COPY gate gate
COPY derivatives derivatives
COPY regime regime
COPY agent agent
COPY broker broker
COPY tracker tracker
COPY learner learner
COPY memory memory
COPY state state
COPY sim sim
COPY report report
COPY api api
RUN pip wheel --no-cache-dir --wheel-dir /wheels .

FROM python:3.11-slim AS runtime
RUN useradd --create-home --uid 10001 vigil \
    && mkdir -p /data /app \
    && chown vigil:vigil /data
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir /wheels/*.whl && rm -rf /wheels
COPY --chown=vigil:vigil data /app/data
ENV VIGIL_STATE_DIR=/data \
    VIGIL_DATA_DIR=/app/data \
    PYTHONUNBUFFERED=1
WORKDIR /app
USER vigil
VOLUME ["/data"]
HEALTHCHECK --interval=30s --timeout=10s --start-period=60s --retries=3 CMD ["vigil", "health"]
# SIGTERM stops the loops in order, flushes journals and saves state (deadline below docker's 10 s).
STOPSIGNAL SIGTERM
ENTRYPOINT ["vigil"]
CMD ["run"]
