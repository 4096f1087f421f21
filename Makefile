# hctune: GNU make, C11.
#
#   make              bin/hctune, bin/hctuned, lib/libhctune.{a,so} (the
#                     client library), tests
#   make STATIC=1     the same with libuv, SQLite, jansson, xxHash linked
#                     statically, for machines without their packages
#                     (without libpq: no live fleet there)
#   make check        CPU tests, then again under AddressSanitizer + UBSan
#   make gpu-check    GPU tests (skip with a reason when there is no GPU)
#   make probe        install missing packages (as root), build, probe card 0
#   make bench-daemon round trips of hct_choose against a plain socket echo
#   make fuzz         libFuzzer on the daemon's request parser (clang),
#                     FUZZ_SECONDS long (default 60)
#
# Sources are found by folder: a new file in client/, jit/, db/, tuner/, daemon/ or
# cli/ is built without touching this file.  tests/test_*.c each become one
# cmocka test program.

CC       ?= gcc
CUDA_HOME ?= /usr/local/cuda
BUILD    ?= release
STATIC   ?= 0

ifeq ($(STATIC),1)
  BUILD := static
endif
ifeq ($(SAN),1)
  BUILD := asan
endif

O := build/$(BUILD)

WARN     := -Wall -Wextra -Werror -Wshadow -Wno-unused-parameter
CPPFLAGS += -D_GNU_SOURCE -Iinclude -Icommon -Ijit -Idb -Ituner -Idaemon -Iclient -Icli
CFLAGS   ?= -O2 -g
CFLAGS   += -std=c11 $(WARN) -fPIC -pthread -ffunction-sections -fdata-sections
LDLIBS_DEPS := -luv -lsqlite3 -ljansson -lxxhash
LDLIBS_SYS  := -ldl -lm -pthread

ifeq ($(BUILD),asan)
  CFLAGS += -O1 -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
  LDFLAGS += -fsanitize=address,undefined
endif
ifeq ($(BUILD),static)
  LDLIBS_DEPS := -Wl,-Bstatic -luv_a -lsqlite3 -ljansson -lxxhash -Wl,-Bdynamic
endif
# jansson of the shared library: Debian's libjansson.a is not
# position-independent, so a STATIC=1 build copies libjansson.so.4 beside
# lib/libhctune.so.0, which finds it there ($ORIGIN): an engine on a GPU
# machine without packages (python3 there) loads lib/ as it is carried.
SO_EXTRA :=
ifeq ($(BUILD),static)
  SO_EXTRA = $(LIB)/libjansson.so.4
endif
# libsystemd gives hctuned socket activation and readiness (sd_listen_fds,
# sd_notify).  Debian ships no static libsystemd, so STATIC=1 builds without
# it (hctuned then binds its own socket and a Type=notify unit would wait).
SYSTEMD ?= $(shell pkg-config --exists libsystemd 2>/dev/null && echo 1 || echo 0)
ifeq ($(BUILD),static)
  SYSTEMD := 0
endif
ifeq ($(SYSTEMD),1)
  CPPFLAGS += -DHCT_HAVE_SYSTEMD
  LDLIBS_DEPS += -lsystemd
endif

# libpq, for the live fleet (db/fleet_pg.c, daemon/fleet_pull.c).  Debian's
# libpq.a needs static libpgcommon, libpgport, Kerberos (GSSAPI) and LDAP
# libraries that Debian does not ship: STATIC=1 builds without it
# (HCT_NO_PG), and `hctune fleet` and `hctuned --fleet-url` say so there.
PG_INCLUDE ?= /usr/include/postgresql
ifeq ($(BUILD),static)
  CPPFLAGS += -DHCT_NO_PG
else
  LDLIBS_DEPS += -lpq
endif

# Output folders: the default build writes bin/ and lib/ at the top; the
# others keep theirs under build/.
ifeq ($(BUILD),release)
  BIN := bin
  LIB := lib
else ifeq ($(BUILD),static)
  BIN := bin
  LIB := lib
else
  BIN := $(O)/bin
  LIB := $(O)/lib
endif

# Two archives: lib/libhctune.{a,so}, the client library engines link (the
# same objects in both), and $(INTERNAL), everything else (jit's compile
# pool and HIP backend, db, tuner, the commands, the daemon's server), which
# only hctune, hctuned and the tests link, never installed, always before
# lib/libhctune.a.  The library is client/ and the files of common/ and
# jit/ it stands on, each compiled once: those use libc, dl, pthread and
# jansson only (no libuv, SQLite or xxHash), so the library needs nothing
# more, and the programs take them from lib/libhctune.a (one copy of every
# symbol).  A file added to common/ or jit/ goes into the internal archive
# unless listed here.
LOWER_SRC  := common/error.c common/names.c common/util.c common/log.c common/tokens.c \
              common/base64.c common/socket_path.c \
              jit/expr.c jit/manifest.c jit/manifest_fields.c jit/manifest_variant.c jit/variants.c \
              jit/points.c jit/op_figures.c jit/options.c jit/plan.c jit/cuda.c jit/cuda_driver.c \
              jit/nvml.c jit/vendor_lib.c
CLIENT_SRC := $(wildcard client/*.c) $(LOWER_SRC)
CORE_SRC   := $(filter-out $(CLIENT_SRC) cli/main.c,$(wildcard common/*.c jit/*.c db/*.c tuner/*.c cli/*.c) \
              $(filter-out daemon/main.c daemon/fuzz_%.c,$(wildcard daemon/*.c)))
INTERNAL   := $(O)/libhctune_internal.a
TEST_SRC   := $(wildcard tests/test_*.c)
TEST_HELPERS := $(filter-out $(TEST_SRC),$(wildcard tests/*.c))

CORE_OBJ   := $(CORE_SRC:%.c=$(O)/%.o)
CLIENT_OBJ := $(CLIENT_SRC:%.c=$(O)/%.o)
TEST_BINS  := $(TEST_SRC:tests/%.c=$(O)/tests/%)
TEST_HELPER_OBJ := $(TEST_HELPERS:%.c=$(O)/%.o)

# Per-file flags: vendor headers only where a backend needs them.  CUDA
# needs none: jit/cuda_abi.h declares what hctune uses of the driver and
# NVRTC, and tests/test_cuda_abi.c compares it with the toolkit's headers
# in $(CUDA_HOME) when there are some (it skips when there are none).
$(O)/tests/test_cuda_abi.o: CPPFLAGS += -DHCT_TOOLKIT_CUDA_H='"$(CUDA_HOME)/include/cuda.h"' \
                                       -DHCT_TOOLKIT_NVRTC_H='"$(CUDA_HOME)/include/nvrtc.h"'
$(O)/jit/hip.o:  CPPFLAGS += -D__HIP_PLATFORM_AMD__
$(O)/jit/hip_%.o: CPPFLAGS += -D__HIP_PLATFORM_AMD__
$(O)/db/fleet_pg.o: CPPFLAGS += -I$(PG_INCLUDE)
$(O)/db/fleet_pg_sync.o: CPPFLAGS += -I$(PG_INCLUDE)
$(O)/tests/test_fleet_pg.o: CPPFLAGS += -I$(PG_INCLUDE)
$(O)/daemon/fleet_pull.o: CPPFLAGS += -I$(PG_INCLUDE)

.PHONY: all install uninstall clean check check-deps check-cpu check-asan check-fuzz gpu-check probe deps bench-daemon tests fuzz
all: $(BIN)/hctune $(BIN)/hctuned $(LIB)/libhctune.a $(LIB)/libhctune.so $(BIN)/hc_engine tests

$(O)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -MMD -MP -c $< -o $@

$(INTERNAL): $(CORE_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(LIB)/libhctune.a: $(CLIENT_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

# The shared library is the client too: an engine that loads it pulls in
# neither SQLite nor libuv (--no-undefined checks that nothing is missing;
# --gc-sections drops what the exported functions never reach).
$(LIB)/libhctune.so.0: $(CLIENT_OBJ) client/libhctune.map $(SO_EXTRA)
	@mkdir -p $(dir $@)
	$(CC) -shared $(LDFLAGS) -Wl,-soname,libhctune.so.0 -Wl,--gc-sections -Wl,--no-undefined \
	  -Wl,--version-script=client/libhctune.map -Wl,-rpath,'$$ORIGIN' \
	  -o $@ $(CLIENT_OBJ) -ljansson $(LDLIBS_SYS)

$(LIB)/libjansson.so.4:
	@mkdir -p $(dir $@)
	cp -L "$$($(CC) -print-file-name=libjansson.so.4)" $@

# The link-time name points at the versioned file that programs load.
$(LIB)/libhctune.so: $(LIB)/libhctune.so.0
	ln -sf libhctune.so.0 $@

# The internal archive first: its objects call the library's (hctune query,
# and jit/ and common/ everywhere).
$(BIN)/hctune: $(O)/cli/main.o $(INTERNAL) $(LIB)/libhctune.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS_DEPS) $(LDLIBS_SYS)

$(BIN)/hctuned: $(O)/daemon/main.o $(INTERNAL) $(LIB)/libhctune.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS_DEPS) $(LDLIBS_SYS)

# The example engine (examples/hc_engine.c): libhctune, plus tuner/parity.c's
# metrics from the internal archive; its CUDA driver is loaded with dlopen.
$(BIN)/hc_engine: $(O)/examples/hc_engine.o $(INTERNAL) $(LIB)/libhctune.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS_DEPS) $(LDLIBS_SYS)

tests: $(TEST_BINS) $(O)/tests/fake_worker

# A stand-in worker process for tests/test_worker.c (misbehaves on
# request) and tests/test_probe_fake.c (reads binaries from the DB as the
# real worker does, with db/'s own calls).
$(O)/tests/fake_worker: $(O)/tests/fake/fake_worker.o $(INTERNAL) $(LIB)/libhctune.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS_DEPS) $(LDLIBS_SYS)

# test_parity_card: the comparison kernels (kernels-src/common/
# parity_check.cu) on the CPU emulator (tests/emu/emu.h) against
# tuner/parity.c.  C++ as the emulator is, so built by its own rule; a test
# program like the others for tests/run.sh and make check.
CXX ?= g++
CXXFLAGS_EMU := -std=c++17 -O1 -g -Wall -Wextra -Werror -Wno-unused-function -Wno-unused-parameter \
                -ffp-contract=off -pthread
ifeq ($(BUILD),asan)
  CXXFLAGS_EMU += -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
endif
$(O)/tests/test_parity_card: tests/emu/parity_card_emu.cc tests/emu/emu.h tests/test_main.h \
    kernels-src/common/parity_check.cu kernels-src/common/hct_parity.h kernels-src/common/hct_kernel.h \
    kernels-src/common/hct_convert.h tuner/tuner.h $(INTERNAL) $(LIB)/libhctune.a
	@mkdir -p $(dir $@)
	$(CXX) $(CPPFLAGS) -Itests/emu -Ikernels-src/common $(CXXFLAGS_EMU) \
	  $(LDFLAGS) -o $@ $< $(INTERNAL) $(LIB)/libhctune.a -lcmocka $(LDLIBS_DEPS) $(LDLIBS_SYS)
tests: $(O)/tests/test_parity_card

# test_slice_emu: slice's arithmetic (kernels-src/hc_read/slice.h) on the
# CPU emulator against the spec's canonical order, bit for bit, and its
# exchanges' byte counts against its mbarriers', at one point (NCL=15:
# rows and channels split unevenly; T = 5, a partial token pair and up
# quad, with and without pending); tests/emu/run.sh runs more points and
# the mutants that must fail.  Under the sanitizers T = 3 (a partial pair,
# the one-quad up stage).
SLICE_EMU_TS := 5
ifeq ($(BUILD),asan)
  SLICE_EMU_TS := 3
endif
$(O)/tests/test_slice_emu: tests/emu/slice_emu.cc tests/emu/emu.h tests/emu/hc_read_canon.h tests/test_main.h \
    kernels-src/hc_read/slice.h kernels-src/common/hc_read.h kernels-src/common/hct_kernel.h \
    kernels-src/common/hct_convert.h
	@mkdir -p $(dir $@)
	$(CXX) $(CPPFLAGS) -Itests/emu -Ikernels-src/common -Ikernels-src/hc_read $(CXXFLAGS_EMU) -Wno-unknown-pragmas \
	  -DS=4 -DC=2560 -DD=10240 -DK=320 -DNCL=15 -DEMU_TS=$(SLICE_EMU_TS) -DEMU_CMOCKA \
	  $(LDFLAGS) -o $@ $< -lcmocka
tests: $(O)/tests/test_slice_emu

# The CPU cross-check of hc_read's reference rounds every product and sum
# apart, as its GPU template does (kernels-src/common/hc_read_ref.h).
$(O)/tests/ref_hc_read.o: CFLAGS += -ffp-contract=off

# Every test program gets tests/test_main.h (HCT_TEST_FILTER, HCT_BIN)
# without including it (-MMD lists it among the object's dependencies).
$(O)/tests/test_%.o: CPPFLAGS += -include tests/test_main.h

$(O)/tests/%: $(O)/tests/%.o $(TEST_HELPER_OBJ) $(INTERNAL) $(LIB)/libhctune.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ -lcmocka $(LDLIBS_DEPS) $(LDLIBS_SYS)

deps:
	@tools/install-deps.sh

# make check also wants clang, for the fuzzer.
check-deps:
	@tools/install-deps.sh check

# check: the CPU tests twice, plainly and under the sanitizers (where the
# compiler-bound tests skip: the sanitizers instrument hctune's C, not
# NVRTC's), then the fuzzer.  Every pass runs even when one fails, and the
# last line adds them up, "N passed, N failed, N skipped" alone on a line
# (cmocka's tests, the fuzzer one more), for a CI runner to read, after a
# line naming the failed programs when some failed (a CI log's tail shows
# both); a pass that failed before its tests ran (its build) counts as one
# failed test.
CHECK_TALLY := $(CURDIR)/build/check.tally
check: check-deps
	@mkdir -p build && : >$(CHECK_TALLY); st=0; \
	 for pass in check-cpu check-asan check-fuzz; do \
	   n=$$(wc -l <$(CHECK_TALLY)); \
	   HCT_TEST_TALLY=$(CHECK_TALLY) $(MAKE) $$pass && continue; \
	   st=1; [ $$(wc -l <$(CHECK_TALLY)) -gt $$n ] || echo "0 1 0 $$pass(no-tests-ran)" >>$(CHECK_TALLY); \
	 done; \
	 awk '{p += $$1; f += $$2; s += $$3; for (i = 4; i <= NF; i++) bad = bad " " $$i} \
	      END {if (bad != "") print "failed:" bad; \
	           printf "%d passed, %d failed, %d skipped\n", p, f, s}' $(CHECK_TALLY); \
	 exit $$st

# The fuzz target needs clang; without it, say so rather than pass silently.
# Its outcome joins make check's tally as one test.
check-fuzz:
	@if ! command -v $(FUZZ_CC) >/dev/null 2>&1; then \
	   echo "fuzz: skipped: no $(FUZZ_CC) for libFuzzer"; t="0 0 1"; \
	 elif $(MAKE) fuzz FUZZ_SECONDS=20; then t="1 0 0"; \
	 else t="0 1 0"; fi; \
	 [ "$$t" != "0 1 0" ] || t="$$t fuzz"; \
	 [ -z "$$HCT_TEST_TALLY" ] || echo "$$t" >>"$$HCT_TEST_TALLY"; \
	 [ "$$t" != "0 1 0" ]

# Two test programs at a time: test_compile's NVRTC compiles (about two
# minutes) run beside the rest, most of which wait on sockets, timers and
# child processes; HCT_TEST_JOBS=1 runs them one by one.
TEST_JOBS ?= 2
check-cpu: all
	HCT_TEST_JOBS=$${HCT_TEST_JOBS:-$(TEST_JOBS)} tests/run.sh $(O)/tests $(BIN)

check-asan:
	$(MAKE) SAN=1 all
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  HCT_TEST_JOBS=$${HCT_TEST_JOBS:-$(TEST_JOBS)} tests/run.sh build/asan/tests build/asan/bin

# On a GPU machine without the build packages, carry a STATIC=1 bin/ there:
# it is used as it is.
gpu-check:
	@[ -x $(BIN)/hctune ] || $(MAKE) all
	tests/gpu-check.sh $(BIN); s=$$?; tests/gpu-engine.sh $(BIN) && exit $$s

probe: deps
	$(MAKE) all
	$(BIN)/hctune probe --device 0
	$(BIN)/hctune list

bench-daemon: all
	tests/bench-daemon.sh $(BIN) $(O)/tests

# libFuzzer on the request parser: proto.c needs only jansson, error.c and
# tokens.c.
# New inputs it finds go to $(O)/fuzz/corpus; daemon/fuzz_corpus seeds it.
FUZZ_CC ?= clang
FUZZ_SECONDS ?= 60
FUZZ_SRC := daemon/fuzz_request.c daemon/proto.c daemon/verbs.c common/error.c common/names.c \
            common/tokens.c

$(O)/fuzz/fuzz_request: $(FUZZ_SRC) daemon/daemon.h include/hctune.h common/common.h
	@mkdir -p $(dir $@)
	$(FUZZ_CC) -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
	  $(CPPFLAGS) -DHCT_VERBS_NO_HANDLERS -std=c11 -Wall -Wextra -Werror -Wno-unused-parameter $(FUZZ_SRC) -o $@ -ljansson

fuzz: $(O)/fuzz/fuzz_request
	@mkdir -p $(O)/fuzz/corpus
	$(O)/fuzz/fuzz_request -max_total_time=$(FUZZ_SECONDS) -max_len=4096 -timeout=5 \
	  -dict=daemon/fuzz_request.dict $(O)/fuzz/corpus daemon/fuzz_corpus

# install: the programs, the client library and header, the kernel
# templates where hctune looks for them (PREFIX/share/hctune/kernels-src,
# found from PREFIX/bin/hctune), hctuned's systemd units and groups, the
# protocol document the units point at, the licence, libhctune's
# pkg-config file (PREFIX/lib/pkgconfig/hctune.pc, its prefix filled in),
# the man pages hctune(1) and hctuned(8) and the bash completion (both
# generated from the programs' --help, rules at the end).  uninstall
# removes exactly these, and the folders of hctune's own.
PREFIX ?= /usr/local
# hctuned's units (socket activation) and the groups they name (sysusers.d);
# systemd reads both from /usr/local/lib too.
SYSTEMD_UNIT_DIR ?= $(PREFIX)/lib/systemd/system
SYSUSERS_DIR ?= $(PREFIX)/lib/sysusers.d
install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/include \
	  $(DESTDIR)$(PREFIX)/share/hctune
	install -m 0755 $(BIN)/hctune $(BIN)/hctuned $(DESTDIR)$(PREFIX)/bin/
	install -m 0644 $(LIB)/libhctune.a $(DESTDIR)$(PREFIX)/lib/
	install -m 0644 include/hctune.h $(DESTDIR)$(PREFIX)/include/
	install -m 0755 $(LIB)/libhctune.so.0 $(DESTDIR)$(PREFIX)/lib/
	ln -sf libhctune.so.0 $(DESTDIR)$(PREFIX)/lib/libhctune.so
	rm -rf $(DESTDIR)$(PREFIX)/share/hctune/kernels-src
	cp -r kernels-src $(DESTDIR)$(PREFIX)/share/hctune/
	install -d $(DESTDIR)$(SYSTEMD_UNIT_DIR) $(DESTDIR)$(SYSUSERS_DIR) $(DESTDIR)$(PREFIX)/share/doc/hctune
	for u in hctuned.service hctuned.socket; do \
	  sed 's|@PREFIX@|$(PREFIX)|g' tools/$$u > $(DESTDIR)$(SYSTEMD_UNIT_DIR)/$$u && \
	  chmod 0644 $(DESTDIR)$(SYSTEMD_UNIT_DIR)/$$u || exit 1; done
	install -m 0644 tools/hctune.sysusers $(DESTDIR)$(SYSUSERS_DIR)/hctune.conf
	install -m 0644 docs/protocol.md LICENSE $(DESTDIR)$(PREFIX)/share/doc/hctune/
	install -d $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(MAN_DIR)/man1 $(DESTDIR)$(MAN_DIR)/man8 \
	  $(DESTDIR)$(COMPLETION_DIR)
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@VERSION@|$(HCT_VERSION)|g' tools/hctune.pc.in \
	  > $(DESTDIR)$(PREFIX)/lib/pkgconfig/hctune.pc
	chmod 0644 $(DESTDIR)$(PREFIX)/lib/pkgconfig/hctune.pc
	install -m 0644 $(MAN_OUT)/hctune.1 $(DESTDIR)$(MAN_DIR)/man1/
	install -m 0644 $(MAN_OUT)/hctuned.8 $(DESTDIR)$(MAN_DIR)/man8/
	install -m 0644 $(COMPLETION_OUT) $(DESTDIR)$(COMPLETION_DIR)/hctune

uninstall:
	rm -f $(DESTDIR)$(PREFIX)/bin/hctune $(DESTDIR)$(PREFIX)/bin/hctuned \
	  $(DESTDIR)$(PREFIX)/lib/libhctune.a $(DESTDIR)$(PREFIX)/lib/libhctune.so.0 \
	  $(DESTDIR)$(PREFIX)/lib/libhctune.so $(DESTDIR)$(PREFIX)/include/hctune.h \
	  $(DESTDIR)$(SYSTEMD_UNIT_DIR)/hctuned.service $(DESTDIR)$(SYSTEMD_UNIT_DIR)/hctuned.socket \
	  $(DESTDIR)$(SYSUSERS_DIR)/hctune.conf $(DESTDIR)$(PREFIX)/lib/pkgconfig/hctune.pc \
	  $(DESTDIR)$(MAN_DIR)/man1/hctune.1 $(DESTDIR)$(MAN_DIR)/man8/hctuned.8 \
	  $(DESTDIR)$(COMPLETION_DIR)/hctune
	rm -rf $(DESTDIR)$(PREFIX)/share/hctune $(DESTDIR)$(PREFIX)/share/doc/hctune

clean:
	rm -rf build bin lib

-include $(shell find build -name '*.d' 2>/dev/null)

# The man pages and the bash completion, generated at build time from the
# programs' own --help texts (tools/gen-man.sh, tools/gen-completion.sh),
# so that neither can drift from the command table or the options; make
# install puts them under MAN_DIR and COMPLETION_DIR.
MAN_DIR ?= $(PREFIX)/share/man
COMPLETION_DIR ?= $(PREFIX)/share/bash-completion/completions
HCT_VERSION := $(shell sed -n 's/^\#define HCT_VERSION_STRING "\(.*\)"/\1/p' include/hctune.h)
MAN_OUT := $(O)/man
COMPLETION_OUT := $(O)/completion/hctune
all: $(MAN_OUT)/hctune.1 $(MAN_OUT)/hctuned.8 $(COMPLETION_OUT)

$(MAN_OUT)/hctune.1: $(BIN)/hctune tools/gen-man.sh
	@mkdir -p $(dir $@)
	tools/gen-man.sh hctune $(BIN) > $@.tmp && mv $@.tmp $@

$(MAN_OUT)/hctuned.8: $(BIN)/hctune $(BIN)/hctuned tools/gen-man.sh
	@mkdir -p $(dir $@)
	tools/gen-man.sh hctuned $(BIN) > $@.tmp && mv $@.tmp $@

$(COMPLETION_OUT): $(BIN)/hctune tools/gen-completion.sh
	@mkdir -p $(dir $@)
	tools/gen-completion.sh $(BIN) > $@.tmp && mv $@.tmp $@
