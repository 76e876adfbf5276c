package site.ycsb.db.redisstring;

import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.Vector;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

import redis.clients.jedis.ClientSetInfoConfig;
import redis.clients.jedis.DefaultJedisClientConfig;
import redis.clients.jedis.HostAndPort;
import redis.clients.jedis.Jedis;
import redis.clients.jedis.JedisClientConfig;
import redis.clients.jedis.exceptions.JedisConnectionException;
import redis.clients.jedis.exceptions.JedisException;
import site.ycsb.ByteArrayByteIterator;
import site.ycsb.ByteIterator;
import site.ycsb.DB;
import site.ycsb.DBException;
import site.ycsb.Status;

/**
 * YCSB binding for <a href="https://redis.io/">Redis</a> that stores each YCSB record as one
 * plain Redis string: the data model of the SlimIO paper's YCSB-A (8-byte keys, 2048-byte
 * values).
 *
 * <p>A record is a single key/value pair. The key is the record's number, zero-padded to exactly
 * {@code redis.keylength} bytes (see {@link KeyCodec}); the value is the bytes of the record's
 * only field, so the workload must use {@code fieldcount=1} with a constant
 * {@code fieldlength} (the value size). Reads are {@code GET}, inserts and updates are
 * {@code SET}, deletes are {@code DEL}; scans are not supported (there is no index, unlike
 * YCSB's stock Redis binding, which stores a hash per record plus a sorted-set index of all
 * keys). The {@code table} argument is ignored: all records live in the connection's default
 * database.
 *
 * <p>YCSB creates one instance per client thread; each opens one connection in {@link #init()}
 * and sends one command per operation (no pipelining, no transactions), using Jedis' byte-array
 * API so no character set is involved. After a connection error (refused, reset, timed out) the
 * operation returns {@link Status#ERROR} and the next operation reconnects.
 *
 * <p>Properties (YCSB's {@code -p name=value} or a workload file):
 * <ul>
 * <li>{@code redis.host} (default {@code 127.0.0.1})</li>
 * <li>{@code redis.port} (default {@code 6379})</li>
 * <li>{@code redis.timeout}: connect and socket timeout in milliseconds (default
 * {@code 60000}; snapshots can stall a server on slow emulated hardware; 0 waits forever)</li>
 * <li>{@code redis.keylength}: the exact length of every key in bytes (default {@code 8})</li>
 * <li>YCSB's {@code fieldcount} must be 1 and {@code fieldlengthdistribution} {@code constant};
 * {@code fieldnameprefix} names the field a read returns ({@code field0} by default)</li>
 * </ul>
 */
public class RedisStringClient extends DB {

  /** Redis server host name or address. */
  public static final String HOST_PROPERTY = "redis.host";
  /** Default of {@link #HOST_PROPERTY}. */
  public static final String HOST_DEFAULT = "127.0.0.1";
  /** Redis server port. */
  public static final String PORT_PROPERTY = "redis.port";
  /** Default of {@link #PORT_PROPERTY}. */
  public static final String PORT_DEFAULT = "6379";
  /** Connect and socket (reply) timeout in milliseconds; 0 waits forever. */
  public static final String TIMEOUT_PROPERTY = "redis.timeout";
  /** Default of {@link #TIMEOUT_PROPERTY}. */
  public static final String TIMEOUT_DEFAULT = "60000";
  /** Exact length of every Redis key in bytes. */
  public static final String KEY_LENGTH_PROPERTY = "redis.keylength";
  /** Default of {@link #KEY_LENGTH_PROPERTY}: the paper's 8-byte keys. */
  public static final String KEY_LENGTH_DEFAULT = "8";

  // YCSB's own properties (site.ycsb.workloads.CoreWorkload and site.ycsb.Client), with
  // CoreWorkload's defaults.
  static final String FIELD_COUNT_PROPERTY = "fieldcount";
  static final String FIELD_COUNT_DEFAULT = "10";
  static final String FIELD_LENGTH_DISTRIBUTION_PROPERTY = "fieldlengthdistribution";
  static final String FIELD_LENGTH_DISTRIBUTION_DEFAULT = "constant";
  static final String FIELD_NAME_PREFIX_PROPERTY = "fieldnameprefix";
  static final String FIELD_NAME_PREFIX_DEFAULT = "field";
  static final String INSERT_ORDER_PROPERTY = "insertorder";
  static final String INSERT_ORDER_DEFAULT = "hashed";
  static final String RECORD_COUNT_PROPERTY = "recordcount";

  /** Digits of the largest number a hashed YCSB key can carry (Math.abs of a 64-bit hash). */
  static final int HASHED_KEY_DIGITS = KeyCodec.decimalDigits(Long.MAX_VALUE);

  /** Minimum time between two error messages of one client thread. */
  private static final long ERROR_LOG_INTERVAL_NS = TimeUnit.SECONDS.toNanos(10);

  /** Whether a key the codec refused was reported (once per process: all threads share keys). */
  private static final AtomicBoolean KEY_ERROR_LOGGED = new AtomicBoolean();
  /** Whether a write without exactly one field was reported (once per process). */
  private static final AtomicBoolean VALUES_ERROR_LOGGED = new AtomicBoolean();

  private String host;
  private int port;
  private JedisClientConfig clientConfig;
  private int keyLength;
  private String fieldName;

  /** This thread's connection; null after a connection error until the next operation. */
  private Jedis jedis;

  private long errors;
  private long errorsSinceLog;
  private long lastErrorLogNanos;
  private boolean errorLogged;

  @Override
  public void init() throws DBException {
    Properties props = getProperties();

    long fieldCount = parseLong(props, FIELD_COUNT_PROPERTY, FIELD_COUNT_DEFAULT);
    if (fieldCount != 1) {
      throw new DBException(FIELD_COUNT_PROPERTY + "=" + fieldCount + ": this binding stores one "
          + "string value per key (the paper's data model); set fieldcount=1 and "
          + "fieldlength=<value bytes>");
    }
    String distribution = props.getProperty(FIELD_LENGTH_DISTRIBUTION_PROPERTY,
        FIELD_LENGTH_DISTRIBUTION_DEFAULT);
    if (!FIELD_LENGTH_DISTRIBUTION_DEFAULT.equals(distribution)) {
      throw new DBException(FIELD_LENGTH_DISTRIBUTION_PROPERTY + "=" + distribution + ": this "
          + "binding stores values of one size (the paper's data model); set "
          + "fieldlengthdistribution=constant and fieldlength=<value bytes>");
    }
    fieldName = props.getProperty(FIELD_NAME_PREFIX_PROPERTY, FIELD_NAME_PREFIX_DEFAULT) + "0";

    keyLength = parseInt(props, KEY_LENGTH_PROPERTY, KEY_LENGTH_DEFAULT);
    if (keyLength < 1) {
      throw new DBException(KEY_LENGTH_PROPERTY + "=" + keyLength + ": keys must be at least 1 "
          + "byte long");
    }
    checkKeysFit(props, keyLength);

    host = props.getProperty(HOST_PROPERTY, HOST_DEFAULT);
    port = parseInt(props, PORT_PROPERTY, PORT_DEFAULT);
    if (port < 1 || port > 65535) {
      throw new DBException(PORT_PROPERTY + "=" + port + ": not a TCP port");
    }
    int timeoutMs = parseInt(props, TIMEOUT_PROPERTY, TIMEOUT_DEFAULT);
    if (timeoutMs < 0) {
      throw new DBException(TIMEOUT_PROPERTY + "=" + timeoutMs + ": the timeout must be 0 "
          + "(wait forever) or a number of milliseconds");
    }
    clientConfig = DefaultJedisClientConfig.builder()
        .connectionTimeoutMillis(timeoutMs)
        .socketTimeoutMillis(timeoutMs)
        // No CLIENT SETINFO on connect: Redis before 7.2 does not know it.
        .clientSetInfoConfig(ClientSetInfoConfig.DISABLED)
        .build();
    try {
      connection().ping();
    } catch (JedisException e) {
      closeQuietly();
      throw new DBException("cannot connect to Redis at " + host + ":" + port + " ("
          + HOST_PROPERTY + ", " + PORT_PROPERTY + "): " + describe(e), e);
    }
  }

  /**
   * Refuses, before any operation, workloads whose key numbers cannot fit {@code keyLength}
   * digits: hashed keys (up to 19 digits) and more ordered records than {@code 10^keyLength}.
   */
  private static void checkKeysFit(Properties props, int keyLength) throws DBException {
    String insertOrder = props.getProperty(INSERT_ORDER_PROPERTY, INSERT_ORDER_DEFAULT);
    if ("hashed".equals(insertOrder) && keyLength < HASHED_KEY_DIGITS) {
      throw new DBException(INSERT_ORDER_PROPERTY + "=hashed: YCSB then numbers records with "
          + "64-bit hashes of up to " + HASHED_KEY_DIGITS + " digits, which do not fit "
          + KEY_LENGTH_PROPERTY + "=" + keyLength + "; set insertorder=ordered (as "
          + "workloads/workloada.properties does) or " + KEY_LENGTH_PROPERTY + ">="
          + HASHED_KEY_DIGITS);
    }
    long recordCount = parseLong(props, RECORD_COUNT_PROPERTY, "0");
    if (!"hashed".equals(insertOrder) && recordCount > 0
        && KeyCodec.decimalDigits(recordCount - 1) > keyLength) {
      throw new DBException(RECORD_COUNT_PROPERTY + "=" + recordCount + ": record numbers up to "
          + (recordCount - 1) + " do not fit " + KEY_LENGTH_PROPERTY + "=" + keyLength
          + " decimal digits; load at most 10^" + keyLength + " records or set a larger "
          + KEY_LENGTH_PROPERTY);
    }
  }

  @Override
  public void cleanup() throws DBException {
    if (errors > 0) {
      System.err.println(prefix() + errors + " operations failed with Redis errors in this "
          + "client thread");
    }
    try {
      if (jedis != null) {
        jedis.close();
      }
    } catch (JedisException e) {
      throw new DBException("closing the connection to " + host + ":" + port + " failed: "
          + describe(e), e);
    } finally {
      jedis = null;
    }
  }

  @Override
  public Status read(String table, String key, Set<String> fields,
                     Map<String, ByteIterator> result) {
    byte[] redisKey = redisKey(key);
    if (redisKey == null) {
      return Status.BAD_REQUEST;
    }
    byte[] value;
    try {
      value = connection().get(redisKey);
    } catch (JedisException e) {
      return failed("GET", redisKey, e);
    }
    if (value == null) {
      return Status.NOT_FOUND;
    }
    if (fields == null || fields.contains(fieldName)) {
      result.put(fieldName, new ByteArrayByteIterator(value));
    }
    return Status.OK;
  }

  @Override
  public Status scan(String table, String startkey, int recordcount, Set<String> fields,
                     Vector<HashMap<String, ByteIterator>> result) {
    return Status.NOT_IMPLEMENTED;
  }

  @Override
  public Status update(String table, String key, Map<String, ByteIterator> values) {
    return set(key, values);
  }

  @Override
  public Status insert(String table, String key, Map<String, ByteIterator> values) {
    return set(key, values);
  }

  @Override
  public Status delete(String table, String key) {
    byte[] redisKey = redisKey(key);
    if (redisKey == null) {
      return Status.BAD_REQUEST;
    }
    try {
      return connection().del(redisKey) > 0 ? Status.OK : Status.NOT_FOUND;
    } catch (JedisException e) {
      return failed("DEL", redisKey, e);
    }
  }

  private Status set(String key, Map<String, ByteIterator> values) {
    if (values.size() != 1) {
      if (VALUES_ERROR_LOGGED.compareAndSet(false, true)) {
        System.err.println(prefix() + "a write of key '" + key + "' has " + values.size()
            + " fields " + values.keySet() + ": this binding stores one string value per key; "
            + "set fieldcount=1 (reported once; such writes return BAD_REQUEST)");
      }
      return Status.BAD_REQUEST;
    }
    byte[] redisKey = redisKey(key);
    if (redisKey == null) {
      return Status.BAD_REQUEST;
    }
    byte[] value = values.values().iterator().next().toArray();
    try {
      String reply = connection().set(redisKey, value);
      if (!"OK".equals(reply)) {
        return failed("SET", redisKey, new JedisException("unexpected reply " + reply));
      }
      return Status.OK;
    } catch (JedisException e) {
      return failed("SET", redisKey, e);
    }
  }

  /** The Redis key of a YCSB key, or null (reported once) if it does not map. */
  private byte[] redisKey(String key) {
    try {
      return KeyCodec.encode(key, keyLength);
    } catch (IllegalArgumentException e) {
      if (KEY_ERROR_LOGGED.compareAndSet(false, true)) {
        System.err.println(prefix() + e.getMessage() + " (reported once; operations on such "
            + "keys return BAD_REQUEST)");
      }
      return null;
    }
  }

  /** This thread's connection, opened again after a connection error. */
  private Jedis connection() {
    if (jedis == null) {
      jedis = new Jedis(new HostAndPort(host, port), clientConfig);
    }
    return jedis;
  }

  /**
   * Reports a failed command (at most once per {@link #ERROR_LOG_INTERVAL_NS} per thread) and
   * drops the connection if it is broken, so the next operation reconnects.
   */
  private Status failed(String command, byte[] redisKey, JedisException e) {
    errors++;
    errorsSinceLog++;
    long now = System.nanoTime();
    if (!errorLogged || now - lastErrorLogNanos >= ERROR_LOG_INTERVAL_NS) {
      String more = errorsSinceLog > 1 ? " (" + (errorsSinceLog - 1) + " more errors since the "
          + "last message)" : "";
      System.err.println(prefix() + command + " " + new String(redisKey,
          StandardCharsets.US_ASCII) + " failed: " + describe(e) + more);
      errorLogged = true;
      lastErrorLogNanos = now;
      errorsSinceLog = 0;
    }
    if (e instanceof JedisConnectionException) {
      closeQuietly();
    }
    return Status.ERROR;
  }

  private void closeQuietly() {
    try {
      if (jedis != null) {
        jedis.close();
      }
    } catch (RuntimeException ignored) {
      // The connection is being dropped anyway.
    } finally {
      jedis = null;
    }
  }

  private String prefix() {
    return "[redis-string " + Thread.currentThread().getName() + " " + host + ":" + port + "] ";
  }

  private static String describe(Throwable e) {
    StringBuilder s = new StringBuilder(e.getClass().getSimpleName() + ": " + e.getMessage());
    for (Throwable cause = e.getCause(); cause != null && cause != cause.getCause();
         cause = cause.getCause()) {
      s.append("; caused by ").append(cause.getClass().getSimpleName()).append(": ")
          .append(cause.getMessage());
    }
    return s.toString();
  }

  private static int parseInt(Properties props, String name, String defaultValue)
      throws DBException {
    long value = parseLong(props, name, defaultValue);
    if (value < Integer.MIN_VALUE || value > Integer.MAX_VALUE) {
      throw new DBException(name + "=" + value + ": out of range");
    }
    return (int) value;
  }

  private static long parseLong(Properties props, String name, String defaultValue)
      throws DBException {
    String value = props.getProperty(name, defaultValue).trim();
    try {
      return Long.parseLong(value);
    } catch (NumberFormatException e) {
      throw new DBException(name + "=" + value + ": not an integer");
    }
  }
}
