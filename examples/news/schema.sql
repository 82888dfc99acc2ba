-- The news aggregator of the Noria paper's figure 2 (a Lobsters-like site), as MariaDB/MySQL
-- tables. `news load` runs this file statement by statement (statements end with ";" at the end
-- of a line), so it starts from empty tables every time.
--
-- Every text column has an explicit collation freshet implements (utf8mb4_general_ci), so
-- that cached queries touching them are not refused. The secondary indexes are the ones the
-- fills of the cached queries in freshet.toml need: a miss on story 42 fills with
-- `... WHERE votes.story_id IN (42)` or `... WHERE comments.story_id IN (42)`, a miss on
-- user 7's karma with `... WHERE stories.author_id IN (7)`; without these, every fill would be
-- a full table scan.
--
-- No foreign keys: the generator and the workload keep references valid themselves (the tests
-- check it), and foreign keys would add locking to every vote and comment insert.

DROP TABLE IF EXISTS comments, votes, stories, users;

CREATE TABLE users (
    id BIGINT NOT NULL,
    name VARCHAR(64) NOT NULL,
    PRIMARY KEY (id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_general_ci;

CREATE TABLE stories (
    id BIGINT NOT NULL,
    author_id BIGINT NOT NULL,
    title VARCHAR(200) NOT NULL,
    url VARCHAR(255) NOT NULL,
    created_at DATETIME NOT NULL,
    PRIMARY KEY (id),
    KEY stories_author (author_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_general_ci;

-- One vote per user and story: retracting a vote deletes the row.
CREATE TABLE votes (
    user_id BIGINT NOT NULL,
    story_id BIGINT NOT NULL,
    PRIMARY KEY (user_id, story_id),
    KEY votes_story (story_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_general_ci;

CREATE TABLE comments (
    id BIGINT NOT NULL AUTO_INCREMENT,
    story_id BIGINT NOT NULL,
    author_id BIGINT NOT NULL,
    body TEXT NOT NULL,
    created_at DATETIME NOT NULL,
    PRIMARY KEY (id),
    KEY comments_story (story_id),
    KEY comments_author (author_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_general_ci;
