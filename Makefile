# The front door.  `make` builds into build/; `make test` and `make demo`
# first install what a fresh Debian 12 machine lacks (scripts/install-deps).
MAKEFLAGS += --no-print-directory
BUILD      ?= build
ASAN_BUILD ?= build-asan
TSAN_BUILD ?= build-tsan
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 120
PREFIX     ?= /usr/local
JOBS       ?= $(shell nproc)
CTEST_ARGS ?= --output-on-failure -j$(JOBS)

.PHONY: all deps deps-bench deps-fuzz deb test test-asan test-tsan test-plain \
	demo bench bench-smoke bench-netns scale soak install clean format fuzz

all:
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	@cmake --build $(BUILD) -j$(JOBS)

deps:
	@scripts/install-deps

# `make bench` also needs the peers it compares against and gnuplot.
deps-bench:
	@scripts/install-deps --bench

# `make fuzz` also needs clang (libFuzzer).
deps-fuzz:
	@scripts/install-deps --fuzz

# The whole suite: the threaded tests under TSan, a normal build, then the
# same suite under ASan+UBSan (its summary closes the output).
test: deps
	@$(MAKE) --no-print-directory test-tsan
	@$(MAKE) --no-print-directory test-plain
	@$(MAKE) --no-print-directory test-asan

test-plain: all
	cd $(BUILD) && ctest $(CTEST_ARGS)

test-asan:
	@cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug \
		-DSV_SANITIZE=address,undefined >/dev/null
	@cmake --build $(ASAN_BUILD) -j$(JOBS)
	cd $(ASAN_BUILD) && ctest $(CTEST_ARGS)

test-tsan:
	@cmake -S . -B $(TSAN_BUILD) -DCMAKE_BUILD_TYPE=Debug \
		-DSV_SANITIZE=thread >/dev/null
	@cmake --build $(TSAN_BUILD) -j$(JOBS)
	cd $(TSAN_BUILD) && ctest $(CTEST_ARGS) -L tsan

# Every fuzz target (fuzz/) under libFuzzer+ASan+UBSan for FUZZ_SECONDS
# each (clang); fails on a crash.  FUZZ_TARGETS: e.g. "ring ud".
fuzz: deps-fuzz
	@cmake -S . -B $(FUZZ_BUILD) -DCMAKE_C_COMPILER=clang \
		-DCMAKE_BUILD_TYPE=RelWithDebInfo -DSV_FUZZ=ON >/dev/null
	@cmake --build $(FUZZ_BUILD) -j$(JOBS) --target fuzz_targets
	@scripts/fuzz $(FUZZ_BUILD) $(FUZZ_SECONDS) $(FUZZ_TARGETS)

demo: deps all
	@scripts/demo $(BUILD)

# BENCH_ARGS: e.g. --repeats 3, --only 'softverbs|ucx-posix/' (bench/README.md)
bench: deps-bench all
	@bench/run --build $(BUILD) $(BENCH_ARGS)

bench-smoke: all
	@bench/run --build $(BUILD) --smoke $(BENCH_ARGS)

# Across two network namespaces over the TCP transport (issue 11; root):
# softverbs, qperf, UCX and libfabric over TCP, and QP set-up time.  Writes
# $(BUILD)/bench-netns/latest.* (bench/results is make bench's).
bench-netns: deps-bench all
	@bench/run --build $(BUILD) --netns --only '^netns-' \
		--out $(BUILD)/bench-netns $(BENCH_ARGS)

# Connection scale (tests/scale): RC QP pairs between two processes, 1 to
# SCALE_MAX; set-up rate, fds and resident memory per connected QP.
SCALE_MAX ?= 4096
scale: all
	@scripts/scale $(BUILD) $(SCALE_MAX)

# Soak (tests/soak, scripts/soak): SOAK_SECONDS (600) of worker pairs and
# Debian's programs on softverbs with random kill -9s and SIGSTOPs, every
# byte checked; report in $(BUILD)/soak/report.json.  Not a performance
# test: it runs at nice 19.  SOAK_PROCS, SOAK_SEED: docs/testing.md "Soak".
soak: all
	@nice -n 19 scripts/soak --build $(BUILD)

install: all
	cmake --install $(BUILD) --prefix $(PREFIX)

# A Debian package of what `make install` installs, under /usr: the
# libraries in /usr/lib/softverbs, the tools in /usr/bin, the man pages
# (cmake/package.cmake); it fails on a file anywhere else (the system's
# libibverbs stays the system's).  apt-get install ./build/deb/softverbs_*.deb
deb: deps all
	@rm -f $(BUILD)/deb/softverbs_*.deb
	@cd $(BUILD) && cpack --config CPackConfig.cmake >cpack.log 2>&1 || \
		{ cat cpack.log; exit 1; }
	@deb=$$(ls $(abspath $(BUILD))/deb/softverbs_*.deb) && \
	bad=$$(dpkg-deb -c "$$deb" | awk '{ print $$6 }' | grep -v '/$$' | \
	grep -vE '^\./usr/(bin|lib/softverbs|share/man/man[1-8])/[^/]+$$'); \
	if [ -n "$$bad" ]; then \
		echo "make deb: files outside /usr/bin, /usr/lib/softverbs" \
		     "and /usr/share/man: $$bad" >&2; exit 1; fi; \
	echo "make deb: $$deb"

format:
	clang-format -i $$(git ls-files '*.c' '*.h')

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(TSAN_BUILD) $(FUZZ_BUILD)
