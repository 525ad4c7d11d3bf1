"""`GenerationReader`: requests share reads of the answer generation, and each one gets a value
read by a query that started after it asked (so a change committed before a request is seen)."""

from __future__ import annotations

import asyncio
import threading

from service.flows.answers.answer_cache import GenerationReader


def run_in_own_thread(scenario) -> None:
    """`asyncio.run(scenario())` in a thread of its own. The main thread of a test process may
    have a loop running already: the dashboard tests' Playwright (sync API) keeps one for the
    whole session, and `asyncio.run` refuses to start beside it (this module then failed after
    a browser test on the same xdist worker)."""
    failure: list[BaseException] = []

    def run() -> None:
        try:
            asyncio.run(scenario())
        except BaseException as exc:  # handed to the test's thread below
            failure.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(timeout=30)
    assert not thread.is_alive(), "the scenario did not finish"
    if failure:
        raise failure[0]


def test_each_request_gets_a_read_that_started_after_it_asked():
    async def scenario():
        started: list[int] = []  # the database's value when each read started
        release = asyncio.Event()
        database = {"value": 0}

        async def read() -> int:
            started.append(database["value"])
            await release.wait()
            return started[-1]

        reader = GenerationReader(read)
        first = asyncio.ensure_future(reader.fresh())
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert started == [0]  # the first read is in flight
        database["value"] = 1  # a writer commits while it runs
        later = [asyncio.ensure_future(reader.fresh()) for _ in range(5)]
        await asyncio.sleep(0)
        release.set()
        assert await first == 0
        # The five that asked during the first read share one read, started after the change.
        assert [await f for f in later] == [1] * 5
        assert started == [0, 1]

    run_in_own_thread(scenario)


def test_a_failed_read_fails_its_waiters_and_the_next_read_runs():
    async def scenario():
        calls = []

        async def read() -> int:
            calls.append(1)
            if len(calls) == 1:
                raise ConnectionError("database down")
            return 7

        reader = GenerationReader(read)
        try:
            await reader.fresh()
        except ConnectionError:
            pass
        else:
            raise AssertionError("the failure was not passed on")
        assert await reader.fresh() == 7

    run_in_own_thread(scenario)
