package site.ycsb.db.redisstring;

import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertNull;
import static org.junit.Assert.assertThrows;
import static org.junit.Assert.assertTrue;

import java.io.IOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Random;
import java.util.Set;
import java.util.Vector;

import org.junit.After;
import org.junit.Before;
import org.junit.ClassRule;
import org.junit.Test;
import redis.clients.jedis.Jedis;
import redis.clients.jedis.args.ClientType;
import redis.clients.jedis.params.ClientKillParams;
import redis.clients.jedis.params.ClientKillParams.SkipMe;
import site.ycsb.ByteArrayByteIterator;
import site.ycsb.ByteIterator;
import site.ycsb.DBException;
import site.ycsb.Status;

/** The binding's operations against a real redis-server. */
public class RedisStringClientTest {

  @ClassRule
  public static final RedisServer SERVER = new RedisServer();

  private static final int VALUE_BYTES = 2048;

  private final List<RedisStringClient> clients = new ArrayList<>();
  private Jedis redis;

  @Before
  public void setUp() {
    redis = SERVER.client();
    redis.flushAll();
  }

  @After
  public void tearDown() throws DBException {
    for (RedisStringClient client : clients) {
      client.cleanup();
    }
    redis.close();
  }

  /** The workload file's binding-relevant settings, on the test server. */
  private static Properties properties(String... overrides) {
    Properties props = new Properties();
    props.setProperty("redis.host", "127.0.0.1");
    props.setProperty("redis.port", Integer.toString(SERVER.port()));
    props.setProperty("fieldcount", "1");
    props.setProperty("fieldlength", Integer.toString(VALUE_BYTES));
    props.setProperty("insertorder", "ordered");
    for (String override : overrides) {
      int eq = override.indexOf('=');
      props.setProperty(override.substring(0, eq), override.substring(eq + 1));
    }
    return props;
  }

  private RedisStringClient client(String... overrides) throws DBException {
    RedisStringClient client = new RedisStringClient();
    client.setProperties(properties(overrides));
    client.init();
    clients.add(client);
    return client;
  }

  private static DBException initFails(String... overrides) {
    RedisStringClient client = new RedisStringClient();
    client.setProperties(properties(overrides));
    return assertThrows(DBException.class, client::init);
  }

  private static byte[] randomValue(long seed) {
    byte[] value = new byte[VALUE_BYTES];
    new Random(seed).nextBytes(value);
    // Every byte value, so any charset conversion would show.
    for (int i = 0; i < 256; i++) {
      value[i] = (byte) i;
    }
    return value;
  }

  private static Map<String, ByteIterator> record(byte[] value) {
    Map<String, ByteIterator> values = new HashMap<>();
    values.put("field0", new ByteArrayByteIterator(value));
    return values;
  }

  private static byte[] key(String key) {
    return key.getBytes(StandardCharsets.US_ASCII);
  }

  @Test
  public void insertThenReadRoundTripsOneStringPerKey() throws DBException {
    RedisStringClient client = client();
    byte[] value = randomValue(1);
    assertEquals(Status.OK, client.insert("usertable", "user42", record(value)));

    assertEquals(1L, redis.dbSize());
    Set<byte[]> keys = redis.keys(key("*"));
    assertEquals(1, keys.size());
    byte[] stored = keys.iterator().next();
    assertEquals(8, stored.length);
    assertArrayEquals(key("00000042"), stored);
    assertEquals("string", redis.type(stored));
    assertEquals(VALUE_BYTES, redis.strlen(stored));
    assertArrayEquals(value, redis.get(stored));

    Map<String, ByteIterator> result = new HashMap<>();
    assertEquals(Status.OK, client.read("usertable", "user42", null, result));
    assertEquals(Collections.singleton("field0"), result.keySet());
    assertArrayEquals(value, result.get("field0").toArray());

    result.clear();
    assertEquals(Status.OK,
        client.read("usertable", "user42", Collections.singleton("field0"), result));
    assertArrayEquals(value, result.get("field0").toArray());

    result.clear();
    assertEquals(Status.OK,
        client.read("usertable", "user42", Collections.singleton("field7"), result));
    assertTrue(result.isEmpty());
  }

  @Test
  public void ycsbZeroPaddedKeysMapToTheSameRecord() throws DBException {
    RedisStringClient client = client();
    byte[] value = randomValue(2);
    assertEquals(Status.OK, client.insert("usertable", "user000000000042", record(value)));
    Map<String, ByteIterator> result = new HashMap<>();
    assertEquals(Status.OK, client.read("usertable", "user42", null, result));
    assertArrayEquals(value, result.get("field0").toArray());
    assertEquals(Collections.singleton("00000042"), redis.keys("*"));
  }

  @Test
  public void keyLengthPropertySetsTheExactKeyLength() throws DBException {
    RedisStringClient client = client("redis.keylength=12");
    assertEquals(Status.OK, client.insert("usertable", "user7", record(randomValue(3))));
    assertEquals(Collections.singleton("000000000007"), redis.keys("*"));
  }

  @Test
  public void updateOverwritesTheValue() throws DBException {
    RedisStringClient client = client();
    byte[] first = randomValue(4);
    byte[] second = randomValue(5);
    assertEquals(Status.OK, client.insert("usertable", "user1", record(first)));
    assertEquals(Status.OK, client.update("usertable", "user1", record(second)));
    assertEquals(1L, redis.dbSize());
    assertArrayEquals(second, redis.get(key("00000001")));
    Map<String, ByteIterator> result = new HashMap<>();
    assertEquals(Status.OK, client.read("usertable", "user1", null, result));
    assertArrayEquals(second, result.get("field0").toArray());
  }

  @Test
  public void updateOfAMissingRecordCreatesIt() throws DBException {
    RedisStringClient client = client();
    byte[] value = randomValue(6);
    assertEquals(Status.OK, client.update("usertable", "user5", record(value)));
    assertArrayEquals(value, redis.get(key("00000005")));
  }

  @Test
  public void readOfAMissingKeyIsNotFound() throws DBException {
    RedisStringClient client = client();
    Map<String, ByteIterator> result = new HashMap<>();
    assertEquals(Status.NOT_FOUND, client.read("usertable", "user99", null, result));
    assertTrue(result.isEmpty());
  }

  @Test
  public void deleteRemovesTheKey() throws DBException {
    RedisStringClient client = client();
    assertEquals(Status.OK, client.insert("usertable", "user3", record(randomValue(7))));
    assertEquals(Status.OK, client.delete("usertable", "user3"));
    assertFalse(redis.exists("00000003"));
    assertEquals(Status.NOT_FOUND, client.delete("usertable", "user3"));
  }

  @Test
  public void scanIsNotImplemented() throws DBException {
    RedisStringClient client = client();
    assertEquals(Status.NOT_IMPLEMENTED,
        client.scan("usertable", "user1", 10, null, new Vector<>()));
  }

  @Test
  public void fieldNamePrefixNamesTheReadField() throws DBException {
    RedisStringClient client = client("fieldnameprefix=f");
    byte[] value = randomValue(8);
    assertEquals(Status.OK, client.insert("usertable", "user8", record(value)));
    Map<String, ByteIterator> result = new HashMap<>();
    assertEquals(Status.OK, client.read("usertable", "user8", Collections.singleton("f0"), result));
    assertArrayEquals(value, result.get("f0").toArray());
  }

  @Test
  public void writesWithoutExactlyOneFieldAreBadRequests() throws DBException {
    RedisStringClient client = client();
    Map<String, ByteIterator> two = record(randomValue(9));
    two.put("field1", new ByteArrayByteIterator(randomValue(10)));
    assertEquals(Status.BAD_REQUEST, client.insert("usertable", "user1", two));
    assertEquals(Status.BAD_REQUEST, client.update("usertable", "user1", new HashMap<>()));
    assertEquals(0L, redis.dbSize());
  }

  @Test
  public void keysThatDoNotFitAreBadRequests() throws DBException {
    RedisStringClient client = client();
    assertEquals(Status.BAD_REQUEST,
        client.insert("usertable", "user123456789", record(randomValue(11))));
    assertEquals(Status.BAD_REQUEST,
        client.read("usertable", "user123456789", null, new HashMap<>()));
    assertEquals(Status.BAD_REQUEST, client.delete("usertable", "nodigits"));
    assertEquals(0L, redis.dbSize());
  }

  @Test
  public void initRefusesMoreThanOneField() {
    DBException e = initFails("fieldcount=2");
    assertTrue(e.getMessage(), e.getMessage().startsWith("fieldcount=2: "));
    assertTrue(e.getMessage(), e.getMessage().contains("set fieldcount=1"));
    assertTrue(e.getMessage(), e.getMessage().contains("fieldlength=<value bytes>"));
  }

  @Test
  public void initRefusesYcsbsDefaultFieldCount() {
    RedisStringClient client = new RedisStringClient();
    Properties props = properties();
    props.remove("fieldcount");
    client.setProperties(props);
    DBException e = assertThrows(DBException.class, client::init);
    assertTrue(e.getMessage(), e.getMessage().startsWith("fieldcount=10: "));
  }

  @Test
  public void initRefusesVariableFieldLengths() {
    DBException e = initFails("fieldlengthdistribution=uniform");
    assertTrue(e.getMessage(), e.getMessage().startsWith("fieldlengthdistribution=uniform: "));
    assertTrue(e.getMessage(), e.getMessage().contains("fieldlengthdistribution=constant"));
  }

  @Test
  public void initRefusesHashedInsertOrderWithShortKeys() throws DBException {
    DBException e = initFails("insertorder=hashed");
    assertTrue(e.getMessage(), e.getMessage().startsWith("insertorder=hashed: "));
    assertTrue(e.getMessage(), e.getMessage().contains("insertorder=ordered"));
    assertTrue(e.getMessage(), e.getMessage().contains("redis.keylength=8"));
    // 19-digit keys hold every hash.
    client("insertorder=hashed", "redis.keylength=19");
  }

  @Test
  public void initRefusesMoreRecordsThanKeysOfTheLength() throws DBException {
    DBException e = initFails("recordcount=100000001");
    assertTrue(e.getMessage(), e.getMessage().startsWith("recordcount=100000001: "));
    assertTrue(e.getMessage(), e.getMessage().contains("redis.keylength=8"));
    client("recordcount=100000000");
  }

  @Test
  public void initRefusesBadNumbers() {
    assertTrue(initFails("redis.port=abc").getMessage().startsWith("redis.port=abc: "));
    assertTrue(initFails("redis.keylength=0").getMessage().startsWith("redis.keylength=0: "));
    assertTrue(initFails("redis.timeout=-1").getMessage().startsWith("redis.timeout=-1: "));
  }

  @Test
  public void initAgainstAClosedPortNamesHostAndPort() throws IOException {
    int closedPort;
    try (ServerSocket socket = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
      closedPort = socket.getLocalPort();
    }
    DBException e = initFails("redis.port=" + closedPort, "redis.timeout=2000");
    assertTrue(e.getMessage(), e.getMessage().contains("127.0.0.1:" + closedPort));
    assertTrue(e.getMessage(), e.getMessage().startsWith("cannot connect to Redis at "));
  }

  @Test
  public void aKilledConnectionIsAnErrorAndTheNextOperationReconnects() throws DBException {
    RedisStringClient client = client("redis.timeout=5000");
    byte[] value = randomValue(12);
    assertEquals(Status.OK, client.insert("usertable", "user1", record(value)));
    // Kill every client connection but this one.
    redis.clientKill(new ClientKillParams().type(ClientType.NORMAL).skipMe(SkipMe.YES));
    Map<String, ByteIterator> result = new HashMap<>();
    assertEquals(Status.ERROR, client.read("usertable", "user1", null, result));
    assertEquals(Status.OK, client.read("usertable", "user1", null, result));
    assertArrayEquals(value, result.get("field0").toArray());
  }

  @Test
  public void aTimedOutReplyIsAnErrorAndIsNotReadByTheNextOperation()
      throws DBException, InterruptedException {
    RedisStringClient client = client("redis.timeout=200");
    byte[] one = randomValue(13);
    byte[] two = randomValue(14);
    assertEquals(Status.OK, client.insert("usertable", "user1", record(one)));
    assertEquals(Status.OK, client.insert("usertable", "user2", record(two)));
    // Hold every client's commands for a second: the GET times out after 200 ms.
    redis.clientPause(1000);
    Map<String, ByteIterator> result = new HashMap<>();
    assertEquals(Status.ERROR, client.read("usertable", "user1", null, result));
    assertTrue(result.isEmpty());
    // The late reply to user1 must not be taken for user2's: the client reconnected.
    long deadline = System.nanoTime() + 10_000_000_000L;
    Status status;
    do {
      result.clear();
      status = client.read("usertable", "user2", null, result);
    } while (status == Status.ERROR && System.nanoTime() < deadline);
    assertEquals(Status.OK, status);
    assertArrayEquals(two, result.get("field0").toArray());
    assertNull(redis.get("00000003"));
  }
}
