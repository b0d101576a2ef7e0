"""Invitation tokens: spending one at intake (minting stores nothing: each proves itself
under the storage key, StorageKeys.invitation).
"""

from ldpsurvey.aggregator.exceptions import TokenRejected
from ldpsurvey.aggregator.store.connection import Connection


def spend_token(db: Connection, survey_id: str, token: str) -> None:
    """Spend an invitation token, so it cannot be used again. One that proves itself (minted
    since schema step 14: StorageKeys.invited) has its keyed hash added to the survey's spent
    tokens: nothing of it was stored before, and no row of another token is touched, so which
    tokens were spent shows in no order, place, transaction or freed space, only in keyed
    hashes. One minted before is deleted from the tokens of then (step 14 put them in the
    order of their keyed hashes). TokenRejected if it is unknown or already spent."""
    token_hash = db.keys.token_hash(token)
    if db.keys.invited(survey_id, token):
        spent = db.execute("INSERT INTO spent_tokens (survey_id, token_hash) VALUES (?, ?) "
                           "ON CONFLICT (survey_id, token_hash) DO NOTHING",
                           (survey_id, token_hash))
    else:
        spent = db.execute("DELETE FROM invitation_tokens WHERE survey_id = ? AND "
                           "token_hash = ?", (survey_id, token_hash))
    if not spent:
        raise TokenRejected()
