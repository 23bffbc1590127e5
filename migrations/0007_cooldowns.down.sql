DROP TABLE provider_cooldowns;
