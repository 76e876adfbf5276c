/**
 * YCSB binding for Redis that stores each YCSB record as one plain Redis string (the SlimIO
 * paper's data model: fixed-length numeric keys, one fixed-size value, GET for reads and SET for
 * inserts and updates). See {@link site.ycsb.db.redisstring.RedisStringClient}.
 */
package site.ycsb.db.redisstring;
