package dev.sandbox4j.runtime.internal.engine;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

/**
 * Every reply the exec helper sends is checked before it is believed (the helper is code in the
 * sandbox as far as the engine is concerned): a reply that is out of order, for a request that is
 * not pending, or with a value out of range is a protocol violation, which gives the helper up.
 */
class ExecHelperProtocolTest {
  private static final int STARTED = 1;
  private static final int FAILED = 2;
  private static final int EXITED = 3;
  private static final int READY = 4;
  private static final int SPARE = 5;
  private static final int STAGE_SPARE = 8;

  private static ExecHelper ready() {
    return ready(1);
  }

  private static ExecHelper ready(int version) {
    ExecHelper h = ExecHelper.forProtocolTest();
    assertThat(h.handle(READY, 0, version, 0)).isNull();
    return h;
  }

  @Test
  void everyVersionSaysWhetherItRunsArgvAsTheShellWould() {
    assertThat(ready(1).runsArgvAsShell()).isFalse();
    assertThat(ready(2).runsArgvAsShell()).isTrue();
    assertThat(ready(3).runsArgvAsShell()).isTrue();
    assertThat(ready(4).runsArgvAsShell()).as("a newer helper serves this engine").isTrue();
    assertThat(ready(4).handle(SPARE, 1, 40, 0)).isNull();
  }

  @Test
  void sparesComeInOrderFromAHelperThatKeepsThem() {
    ExecHelper h = ready(3);
    assertThat(h.handle(SPARE, 1, 40, 0)).isNull();
    assertThat(h.handle(SPARE, 2, 41, 0)).isNull();
    assertThat(h.handle(SPARE, 2, 42, 0)).as("the same spare twice").contains("violation");
    assertThat(ready(3).handle(SPARE, 0, 40, 0)).as("sequence 0").contains("violation");
    assertThat(ready(2).handle(SPARE, 1, 40, 0)).as("from version 2").contains("violation");
    assertThat(ExecHelper.forProtocolTest().handle(SPARE, 1, 40, 0))
        .as("before READY")
        .contains("violation");
    for (int pid : new int[] {0, -1, 4_194_305}) {
      assertThat(ready(3).handle(SPARE, 1, pid, 0)).as("pid " + pid).contains("violation");
    }
    assertThat(ready(3).handle(SPARE, 1, 40, 1)).as("b not 0").contains("violation");
  }

  @Test
  void onlyAClaimCanFindItsSpareGone() {
    ExecHelper h = ready(3);
    ExecHelper.Pending claim = h.pendingForTest(1, true);
    assertThat(h.handle(FAILED, 1, 3, STAGE_SPARE)).isNull();
    assertThat(claim.started.join()).isEqualTo(-1);
    assertThat(claim.ended.join().spareGone()).as("nothing ran: start it the usual way").isTrue();

    ExecHelper g = ready(3);
    g.pendingForTest(1, false);
    assertThat(g.handle(FAILED, 1, 3, STAGE_SPARE))
        .as("a request, not a claim")
        .contains("violation");

    ExecHelper f = ready(3);
    ExecHelper.Pending claimed = f.pendingForTest(1, true);
    assertThat(f.handle(STARTED, 1, 40, 0)).isNull();
    assertThat(f.handle(FAILED, 1, 1, 4)).as("a claimed spare that could not setuid").isNull();
    assertThat(claimed.ended.join().spareGone()).isFalse();
    assertThat(claimed.ended.join().stage()).isEqualTo("setuid");
  }

  @Test
  void aWellBehavedExchangeIsBelieved() {
    ExecHelper h = ready();
    ExecHelper.Pending p = h.pendingForTest(7);
    assertThat(h.handle(STARTED, 7, 42, 0)).isNull();
    assertThat(p.started.join()).isEqualTo(42);
    assertThat(h.handle(EXITED, 7, 3, 0)).isNull();
    assertThat(p.ended.join().exit()).isEqualTo(3);
    ExecHelper.Pending q = h.pendingForTest(8);
    assertThat(h.handle(FAILED, 8, 11, 1)).isNull();
    assertThat(q.ended.join().failedToStart()).isTrue();
    assertThat(q.ended.join().stage()).isEqualTo("fork");
  }

  @Test
  void aKeeperKilledFromInsideFailsItsCommand() {
    ExecHelper h = ready();
    ExecHelper.Pending p = h.pendingForTest(1);
    assertThat(h.handle(STARTED, 1, 5, 0)).isNull();
    assertThat(h.handle(EXITED, 1, 137, 1)).isNull();
    assertThat(p.ended.join().lost()).contains("killed from inside the sandbox");
  }

  @Test
  void outOfOrderOrUnknownRepliesAreViolations() {
    assertThat(ExecHelper.forProtocolTest().handle(STARTED, 1, 5, 0))
        .as("a reply before READY")
        .contains("protocol violation");
    assertThat(ready().handle(READY, 0, 1, 0)).as("READY twice").contains("protocol violation");
    assertThat(ExecHelper.forProtocolTest().handle(READY, 0, 0, 0))
        .as("version 0")
        .contains("protocol violation");
    assertThat(ready().handle(STARTED, 99, 5, 0))
        .as("a request that is not pending")
        .contains("protocol violation");
    assertThat(ready().handle(0xdeadbeef, 0, 0, 0)).contains("protocol violation");
    ExecHelper h = ready();
    h.pendingForTest(3);
    assertThat(h.handle(EXITED, 3, 0, 0)).as("EXITED before STARTED").contains("violation");
    h = ready();
    h.pendingForTest(3);
    assertThat(h.handle(STARTED, 3, 5, 0)).isNull();
    assertThat(h.handle(STARTED, 3, 5, 0)).as("STARTED twice").contains("violation");
  }

  @Test
  void valuesOutOfRangeAreViolations() {
    for (int pid : new int[] {0, -1, Integer.MIN_VALUE, 4_194_305, Integer.MAX_VALUE}) {
      ExecHelper h = ready();
      h.pendingForTest(1);
      assertThat(h.handle(STARTED, 1, pid, 0)).as("pid " + pid).contains("violation");
    }
    for (int code : new int[] {-1, 256, Integer.MAX_VALUE}) {
      ExecHelper h = ready();
      h.pendingForTest(1);
      h.handle(STARTED, 1, 5, 0);
      assertThat(h.handle(EXITED, 1, code, 0)).as("exit " + code).contains("violation");
    }
    ExecHelper h = ready();
    h.pendingForTest(1);
    h.handle(STARTED, 1, 5, 0);
    assertThat(h.handle(EXITED, 1, 0, 2)).as("flag 2").contains("violation");
    for (int[] f : new int[][] {{-1, 1}, {4096, 1}, {11, 0}, {11, 8}, {11, -3}}) {
      ExecHelper g = ready();
      g.pendingForTest(1);
      assertThat(g.handle(FAILED, 1, f[0], f[1]))
          .as("FAILED %d %d", f[0], f[1])
          .contains("violation");
    }
  }

  @Test
  void givingUpFailsEveryPendingCommand() {
    ExecHelper h = ready();
    ExecHelper.Pending a = h.pendingForTest(1);
    ExecHelper.Pending b = h.pendingForTest(2);
    h.handle(STARTED, 2, 9, 0);
    h.lose("protocol violation: test");
    assertThat(a.started.join()).isEqualTo(-1);
    assertThat(a.ended.join().lost()).contains("protocol violation");
    assertThat(b.ended.join().lost()).contains("protocol violation");
    assertThat(h.lost()).isNotNull();
  }
}
