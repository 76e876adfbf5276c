package site.ycsb.db.redisstring;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.junit.AfterClass;
import org.junit.BeforeClass;
import org.junit.ClassRule;
import org.junit.Test;
import redis.clients.jedis.Jedis;
import redis.clients.jedis.params.ScanParams;
import redis.clients.jedis.resps.ScanResult;

/**
 * YCSB's own {@code site.ycsb.Client} with this binding and {@code workloads/workloada.properties}
 * (scaled down with {@code -p}), in a child JVM as the pipeline runs it (Client.main calls
 * System.exit), against a real redis-server.
 */
public class YcsbClientEndToEndTest {

  @ClassRule
  public static final RedisServer SERVER = new RedisServer();

  private static final int RECORDS = 2000;
  private static final int OPERATIONS = 5000;
  private static final int THREADS = 4;
  private static final int VALUE_BYTES = 2048;
  private static final int KEY_BYTES = 8;
  private static final long PHASE_TIMEOUT_S = 300;

  private static Path outputDir;

  @BeforeClass
  public static void createOutputDir() throws IOException {
    outputDir = Files.createTempDirectory("redis-string-ycsb-");
  }

  @AfterClass
  public static void deleteOutputDir() {
    RedisServer.deleteRecursively(outputDir);
  }

  /** What a YCSB phase printed and how it exited. */
  private static final class Phase {
    private final int exitCode;
    private final String stdout;
    private final String stderr;

    Phase(int exitCode, String stdout, String stderr) {
      this.exitCode = exitCode;
      this.stdout = stdout;
      this.stderr = stderr;
    }

    String describe() {
      return "exit " + exitCode + "\n--- stdout ---\n" + stdout + "\n--- stderr ---\n" + stderr;
    }
  }

  private static Path workloadFile() {
    String dir = System.getProperty("ycsb.workloads.dir", "../workloads");
    Path file = Paths.get(dir, "workloada.properties");
    assertTrue("no workload file " + file.toAbsolutePath(), Files.isRegularFile(file));
    return file;
  }

  /** Runs site.ycsb.Client in a child JVM on this JVM's (the tests') classpath. */
  private static Phase runYcsb(String name, String phase, String... properties)
      throws IOException, InterruptedException {
    List<String> command = new ArrayList<>();
    command.add(Paths.get(System.getProperty("java.home"), "bin", "java").toString());
    command.add("-cp");
    command.add(System.getProperty("java.class.path"));
    command.add("site.ycsb.Client");
    command.add(phase);
    command.add("-db");
    command.add(RedisStringClient.class.getName());
    command.add("-P");
    command.add(workloadFile().toString());
    command.add("-s");
    for (String property : properties) {
      command.add("-p");
      command.add(property);
    }
    Path stdout = outputDir.resolve(name + ".stdout");
    Path stderr = outputDir.resolve(name + ".stderr");
    Process process = new ProcessBuilder(command)
        .redirectOutput(stdout.toFile())
        .redirectError(stderr.toFile())
        .start();
    if (!process.waitFor(PHASE_TIMEOUT_S, TimeUnit.SECONDS)) {
      process.destroyForcibly();
      process.waitFor();
      fail("YCSB " + phase + " did not finish within " + PHASE_TIMEOUT_S + " s: "
          + new Phase(-1, read(stdout), read(stderr)).describe());
    }
    return new Phase(process.exitValue(), read(stdout), read(stderr));
  }

  private static String read(Path file) throws IOException {
    return new String(Files.readAllBytes(file), StandardCharsets.UTF_8);
  }

  private static String[] scaledDown(String... extra) {
    List<String> properties = new ArrayList<>(Arrays.asList(
        "recordcount=" + RECORDS,
        "operationcount=" + OPERATIONS,
        "threadcount=" + THREADS,
        "fieldlength=" + VALUE_BYTES,
        "redis.keylength=" + KEY_BYTES,
        "redis.host=127.0.0.1",
        "redis.port=" + SERVER.port(),
        "status.interval=1"));
    properties.addAll(Arrays.asList(extra));
    return properties.toArray(new String[0]);
  }

  /** The number of a summary line "[SECTION], name, value" (value may be fractional). */
  private static double summary(Phase phase, String section, String name) {
    Matcher m = Pattern.compile("^\\[" + Pattern.quote(section) + "\\], " + Pattern.quote(name)
        + ", ([0-9.E+-]+|NaN)$", Pattern.MULTILINE).matcher(phase.stdout);
    assertTrue("no [" + section + "], " + name + " line:\n" + phase.describe(), m.find());
    return Double.parseDouble(m.group(1));
  }

  private static long count(Phase phase, String section, String name) {
    double value = summary(phase, section, name);
    assertEquals(Math.rint(value), value, 0.0);
    return (long) value;
  }

  @Test
  public void loadAndRunWorkloadAStoreOneStringPerRecord() throws Exception {
    try (Jedis redis = SERVER.client()) {
      redis.flushAll();
    }

    Phase load = runYcsb("load", "-load", scaledDown());
    assertEquals(load.describe(), 0, load.exitCode);
    assertEquals(load.describe(), RECORDS, count(load, "INSERT", "Operations"));
    assertEquals(load.describe(), RECORDS, count(load, "INSERT", "Return=OK"));
    assertFalse(load.describe(), load.stdout.contains("Return=ERROR"));

    try (Jedis redis = SERVER.client()) {
      assertEquals(RECORDS, redis.dbSize());
      // Every key: exactly 8 digits, a string of exactly 2048 bytes; together records 0..1999.
      Set<String> keys = new HashSet<>();
      String cursor = ScanParams.SCAN_POINTER_START;
      do {
        ScanResult<String> page = redis.scan(cursor, new ScanParams().count(500));
        keys.addAll(page.getResult());
        cursor = page.getCursor();
      } while (!cursor.equals(ScanParams.SCAN_POINTER_START));
      assertEquals(RECORDS, keys.size());
      Set<String> expected = new HashSet<>();
      for (int n = 0; n < RECORDS; n++) {
        expected.add(String.format("%08d", n));
      }
      assertEquals(expected, keys);
      int sampled = 0;
      for (String key : keys) {
        if (sampled++ == 200) {
          break;
        }
        assertEquals(key, KEY_BYTES, key.getBytes(StandardCharsets.UTF_8).length);
        assertEquals(key, "string", redis.type(key));
        assertEquals(key, VALUE_BYTES, redis.strlen(key));
      }
    }

    // As the pipeline runs it: the HdrHistogram interval logs too (one file per operation).
    Path hdrPrefix = outputDir.resolve("run-");
    Phase run = runYcsb("run", "-t", scaledDown("hdrhistogram.fileoutput=true",
        "hdrhistogram.output.path=" + hdrPrefix));
    assertEquals(run.describe(), 0, run.exitCode);
    for (String op : new String[] {"READ", "UPDATE"}) {
      Path log = Paths.get(hdrPrefix + op + ".hdr");
      assertTrue(run.describe(), Files.size(log) > 0);
      assertTrue(read(log).contains("[Logging for: " + op + "]"));
    }
    long reads = count(run, "READ", "Operations");
    long updates = count(run, "UPDATE", "Operations");
    assertEquals(run.describe(), OPERATIONS, reads + updates);
    assertTrue(run.describe(), reads > 0 && updates > 0);
    assertEquals(run.describe(), reads, count(run, "READ", "Return=OK"));
    assertEquals(run.describe(), updates, count(run, "UPDATE", "Return=OK"));
    assertTrue(summary(run, "READ", "99.9PercentileLatency(us)") > 0);
    assertTrue(summary(run, "UPDATE", "99.9PercentileLatency(us)") > 0);
    assertTrue(summary(run, "OVERALL", "Throughput(ops/sec)") > 0);
    assertFalse(run.describe(), run.stdout.contains("READ-FAILED"));
    assertFalse(run.describe(), run.stdout.contains("UPDATE-FAILED"));
    assertTrue(run.describe(), run.stderr.contains("current ops/sec"));
    assertFalse(run.describe(), run.stderr.contains("SLF4J"));
    assertFalse(run.describe(), run.stderr.contains("[redis-string "));

    try (Jedis redis = SERVER.client()) {
      assertEquals(RECORDS, redis.dbSize());
    }
  }

  /**
   * YCSB 0.17.0 exits 0 even when every client thread's init() fails: the DBException is
   * printed (stderr and stdout) and no operation runs. Whoever runs YCSB must check the
   * operation counts, not only the exit code.
   */
  @Test
  public void refusedWorkloadIsReportedButYcsbStillExitsZero() throws Exception {
    Phase load = runYcsb("refused", "-load", scaledDown("fieldcount=10"));
    assertEquals(load.describe(), 0, load.exitCode);
    assertTrue(load.describe(), load.stderr.contains("site.ycsb.DBException: fieldcount=10: "));
    assertFalse(load.describe(), load.stdout.contains("[INSERT], Operations"));
  }
}
