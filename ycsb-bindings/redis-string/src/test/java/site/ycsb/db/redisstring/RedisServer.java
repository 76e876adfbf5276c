package site.ycsb.db.redisstring;

import static org.junit.Assert.fail;

import java.io.File;
import java.io.IOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

import org.junit.rules.ExternalResource;
import redis.clients.jedis.Jedis;
import redis.clients.jedis.Protocol;
import redis.clients.jedis.exceptions.JedisException;

/**
 * A real redis-server for the tests, as a JUnit rule: started on a free loopback port without
 * persistence ({@code --save "" --appendonly no}) in a temporary directory, ready once it answers
 * PING, and shut down (SHUTDOWN NOSAVE, then killed if it lingers) afterwards.
 *
 * <p>The binary is the system property {@code redis.server} (surefire passes
 * {@code mvn -Dredis.server=/path/to/redis-server} through), else {@code redis-server} on PATH.
 * Without one the tests fail: they are the only check that the binding talks to a real server.
 */
final class RedisServer extends ExternalResource {

  /** System property naming the redis-server binary. */
  static final String SERVER_PROPERTY = "redis.server";

  private static final long START_TIMEOUT_NS = TimeUnit.SECONDS.toNanos(30);
  private static final long POLL_INTERVAL_MS = 10;
  private static final int START_ATTEMPTS = 5;

  private Path dir;
  private Process process;
  private int port;

  /** The loopback port the server listens on. */
  int port() {
    return port;
  }

  /** A new connection to the server (close it). */
  Jedis client() {
    return new Jedis("127.0.0.1", port);
  }

  /** The redis-server binary: {@code -Dredis.server}, else redis-server on PATH; else fails. */
  static Path findBinary() {
    String configured = System.getProperty(SERVER_PROPERTY, "").trim();
    if (!configured.isEmpty() && !configured.startsWith("${")) {
      Path binary = Paths.get(configured);
      if (!Files.isRegularFile(binary) || !Files.isExecutable(binary)) {
        fail("-D" + SERVER_PROPERTY + "=" + configured + " is not an executable file; pass "
            + "-D" + SERVER_PROPERTY + "=/path/to/redis-server");
      }
      return binary;
    }
    String path = System.getenv("PATH");
    if (path != null) {
      for (String entry : path.split(File.pathSeparator)) {
        if (entry.isEmpty()) {
          continue;
        }
        Path candidate = Paths.get(entry, "redis-server");
        if (Files.isRegularFile(candidate) && Files.isExecutable(candidate)) {
          return candidate;
        }
      }
    }
    fail("no redis-server to test against: pass -D" + SERVER_PROPERTY
        + "=/path/to/redis-server (e.g. mvn -B -D" + SERVER_PROPERTY
        + "=/path/to/redis-server package) or put redis-server on PATH");
    throw new AssertionError("unreachable");
  }

  @Override
  protected void before() throws Throwable {
    Path binary = findBinary();
    dir = Files.createTempDirectory("redis-string-test-");
    Path log = dir.resolve("redis.log");
    String lastFailure = null;
    for (int attempt = 1; attempt <= START_ATTEMPTS; attempt++) {
      port = freePort();
      List<String> command = new ArrayList<>();
      command.add(binary.toString());
      command.add("--save");
      command.add("");
      command.add("--appendonly");
      command.add("no");
      command.add("--port");
      command.add(Integer.toString(port));
      command.add("--bind");
      command.add("127.0.0.1");
      command.add("--dir");
      command.add(dir.toString());
      process = new ProcessBuilder(command)
          .redirectErrorStream(true)
          .redirectOutput(log.toFile())
          .start();
      lastFailure = awaitPing(log);
      if (lastFailure == null) {
        return;
      }
      stopProcess();
    }
    fail("redis-server " + binary + " did not answer PING after " + START_ATTEMPTS
        + " attempts: " + lastFailure);
  }

  /** Polls PING until the server answers; null when it does, else why it did not. */
  private String awaitPing(Path log) throws IOException, InterruptedException {
    long deadline = System.nanoTime() + START_TIMEOUT_NS;
    String lastError = "no answer";
    while (System.nanoTime() < deadline) {
      if (!process.isAlive()) {
        return "exited with " + process.exitValue() + "; its log: "
            + new String(Files.readAllBytes(log), StandardCharsets.UTF_8);
      }
      try (Jedis jedis = client()) {
        if ("PONG".equals(jedis.ping())) {
          return null;
        }
      } catch (JedisException e) {
        lastError = e.getMessage();
      }
      Thread.sleep(POLL_INTERVAL_MS);
    }
    return "no PONG within " + TimeUnit.NANOSECONDS.toSeconds(START_TIMEOUT_NS) + " s ("
        + lastError + ")";
  }

  @Override
  protected void after() {
    try {
      if (process != null && process.isAlive()) {
        try (Jedis jedis = client()) {
          jedis.sendCommand(Protocol.Command.SHUTDOWN, "NOSAVE");
        } catch (JedisException expected) {
          // The server closes the connection as it exits.
        }
      }
      stopProcess();
    } finally {
      deleteRecursively(dir);
    }
  }

  private void stopProcess() {
    if (process == null) {
      return;
    }
    try {
      if (!process.waitFor(10, TimeUnit.SECONDS)) {
        process.destroyForcibly();
        process.waitFor(10, TimeUnit.SECONDS);
      }
    } catch (InterruptedException e) {
      process.destroyForcibly();
      Thread.currentThread().interrupt();
    }
    process = null;
  }

  private static int freePort() throws IOException {
    try (ServerSocket socket = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
      return socket.getLocalPort();
    }
  }

  static void deleteRecursively(Path root) {
    if (root == null || !Files.exists(root)) {
      return;
    }
    try (Stream<Path> paths = Files.walk(root)) {
      paths.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
    } catch (IOException e) {
      // Leave a temporary directory behind rather than fail the tests.
    }
  }
}
