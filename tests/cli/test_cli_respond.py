"""`ldp-survey respond` and `ldp-survey privacy` against a real aggregator."""

import base64
import json
import math
from importlib import resources

import pytest
from click.testing import CliRunner

from ldpsurvey.cli import main
from ldpsurvey.client import INTRO, bound_note, release_summary
from ldpsurvey.client.notes import OPEN_NOT_MIXED
from ldpsurvey.shared import read_definition

from helpers import OPEN_AND_HIDDEN, published, released_n, sent_body


@pytest.fixture
def health_id(client, auth):
    example = resources.files("ldpsurvey.shared") / "examples" / "health.toml"
    with resources.as_file(example) as path:
        # released at once, so a test reads the count right after answering
        response = client.post("/api/surveys", json={**read_definition(path), "release_batch": 1},
                               headers=auth)
    return response.json["survey_id"]


@pytest.fixture
def runner(tmp_path, monkeypatch):
    monkeypatch.setenv("LDP_SURVEY_CLIENT_DIR", str(tmp_path / "respondent"))
    return CliRunner()


def responses(client, auth, survey_id):
    return released_n(client, auth, survey_id)


ANSWERS = "smoked=yes,drank_and_drove=no,cannabis=n,sleep=6 to 8"


def test_scripted(runner, live_server, client, auth, health_id):
    result = runner.invoke(main, ["respond", "--url", live_server, "--survey", health_id,
                                  "--answers", ANSWERS, "--yes", "--details"])
    assert result.exit_code == 0, result.output
    assert "If you answer Yes, the server receives Yes with 75 % probability" in result.stdout
    assert "at most 75 % sure after seeing this answer" in result.stdout
    assert "This is exactly what will be sent" in result.stdout and "Sent." in result.stdout
    assert responses(client, auth, health_id) == 1
    again = runner.invoke(main, ["respond", "--url", live_server, "--survey", health_id, "--yes"])
    assert again.exit_code == 0, again.output
    assert "You already sent this survey from this device" in again.stdout
    assert responses(client, auth, health_id) == 1


def test_plain_words_first_and_the_details_only_when_asked(runner, live_server, health_id):
    """Without --details respond speaks everyday words only (the web form's targets: no
    epsilon, ln, budget, ceiling or client, reading grade 8 or below); --details adds the exact
    chances, epsilon and the ledger."""
    from plain_words import MAX_GRADE, grade, kept_for_details

    plain = runner.invoke(main, ["respond", "--url", live_server, "--survey", health_id,
                                 "--answers", ANSWERS, "--yes"])
    assert plain.exit_code == 0, plain.output
    assert INTRO in plain.stdout and "--details" in plain.stdout
    assert bound_note([math.log(3)]) in plain.stdout  # smoked, ln 3, reveals most: 75 %
    assert "Your real answers never left this device." in plain.stdout
    assert kept_for_details(plain.stdout) == [] and grade(plain.stdout) <= MAX_GRADE
    assert "server receives Yes with" not in plain.stdout

    detailed = runner.invoke(main, ["respond", "--url", live_server, "--survey", health_id,
                                    "--yes", "--details"])
    assert detailed.exit_code == 0, detailed.output
    assert "How your answers are protected. Privacy: epsilon" in detailed.stdout
    assert "server receives Yes with 75 % probability" in detailed.stdout
    assert "This device has now disclosed epsilon" in detailed.stdout


def test_interactive(runner, live_server, client, auth, health_id):
    result = runner.invoke(main, ["respond", "--url", live_server, "--survey", health_id],
                           input="maybe\nyes\nno\nno\n7\n1\n\ny\n")  # Enter: randomize
    assert result.exit_code == 0, result.output
    assert "takes yes or no" in result.output and "option number from 0 to 2" in result.output
    assert responses(client, auth, health_id) == 1


HELD = {"title": "Held", "release_batch": 1, "questions": [
    {"id": "drinks", "text": "Which did you drink?", "type": "multi_select",
     "options": ["Beer", "Wine", "Cider", "Spirits"], "mechanism": "padding", "max_selected": 2,
     "epsilon": 1.0},
    {"id": "sports", "text": "Which did you do?", "type": "multi_select",
     "options": ["Run", "Swim", "Bike"], "mechanism": "bits", "max_selected": 1, "epsilon": 1.0},
    {"id": "glasses", "text": "Glasses of water a day?", "type": "numeric", "min": 0,
     "max": 20, "epsilon": 1.0}]}


def test_respond_holds_the_respondent_to_max_selected_and_the_range(runner, live_server,
                                                                    client, auth):
    """A tick past max_selected (padding and bits alike) and a number outside [min, max] are
    one line each and the question asked again, never dropped or clamped; the answers given
    next are the ones reviewed and sent. From --answers, the same line and exit 2."""
    survey_id = published(client, auth, HELD)
    result = runner.invoke(main, ["respond", "--url", live_server, "--survey", survey_id],
                           input="Beer;Wine;Cider\nBeer;Cider\nRun;Swim\nSwim\n500\n-1\n"
                                 "6\n\ny\n")
    assert result.exit_code == 0, result.output
    errors = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert errors == [
        "Error: question 'drinks' takes at most 2 options (3 given)",
        "Error: question 'sports' takes at most 1 option (2 given)",
        "Error: question 'glasses' takes a number from 0 to 20; 500 is outside",
        "Error: question 'glasses' takes a number from 0 to 20; -1 is outside"]
    assert "[drinks] Beer; Cider" in result.output and "[glasses] 6\n" in result.output
    assert responses(client, auth, survey_id) == 1
    for answers, said in (("drinks=Beer;Wine;Cider,sports=none,glasses=6",
                           "question 'drinks' takes at most 2 options (3 given)"),
                          ("drinks=none,sports=none,glasses=500",
                           "question 'glasses' takes a number from 0 to 20; 500 is outside")):
        refused = runner.invoke(main, ["respond", "--url", live_server, "--survey",
                                       published(client, auth, HELD), "--answers", answers,
                                       "--yes"])
        assert refused.exit_code == 2 and said in refused.output, refused.output


def test_respond_says_what_is_sent_in_plain_words_and_exactly_with_details(runner, live_server,
                                                                         client, auth):
    """On a survey of every question type: each report in everyday words (as the web form,
    test_every_form.py::test_the_page_words_each_report_as_the_python_client_does);
    --details adds each exactly, as the server reads it."""
    from helpers import EVERY_TYPE, EVERY_TYPE_ANSWERS, TECHNICAL

    survey_id = published(client, auth, EVERY_TYPE)
    answers = ",".join(f"{qid}={v if isinstance(v, str) else ';'.join(v)}"
                       for qid, v in EVERY_TYPE_ANSWERS.items())
    plain = runner.invoke(main, ["respond", "--url", live_server, "--survey", survey_id,
                                 "--answers", answers, "--yes"])
    assert plain.exit_code == 0, plain.output
    sent = plain.output.split("exactly what will be sent")[1].split("Some answers may")[0]
    assert sent.count("\n  [") == len(EVERY_TYPE["questions"])
    assert not [word for word in TECHNICAL if word in sent], sent
    assert "[bread] a code that fits several answers" in sent and "[age] 40 years (as given)" in sent
    detailed = runner.invoke(main, ["respond", "--url", live_server, "--survey", survey_id,
                                    "--yes", "--details"])
    assert detailed.exit_code == 0, detailed.output
    exact = detailed.output.split("As the server reads it:")[1].split("The request body")[0]
    assert exact.count("\n  [") == len(EVERY_TYPE["questions"])
    for word in ("marks ", "seed ", "hash value", "randomized cell"):
        assert word in exact, word


def test_true_answers_are_reviewed_and_can_be_changed_before_randomizing(runner, live_server,
                                                                         health_id, tmp_path):
    """A mis-typed answer is corrected at the review, before anything is randomized: the
    review shows the corrected answer; an unknown id is said so; Enter randomizes, and only
    then are the randomized answers shown."""
    result = runner.invoke(main, ["respond", "--url", live_server, "--survey", health_id],
                           input="yes\nno\nno\n1\nsleep\n2\nnosuch\n\nn\n")
    assert result.exit_code == 0, result.output
    reviews = result.output.split("Your answers, before the coin flips")
    assert len(reviews) == 4  # the first review, after 'sleep', after 'nosuch'
    assert "[sleep] 6 to 8" in reviews[1] and "[sleep] Over 8" in reviews[2]
    assert "(only you see them; they never leave this device)" in reviews[1]
    assert "'nosuch' is not one of the questions above" in result.output
    assert "This is exactly what will be sent" in reviews[3] and "Not sent" in result.output


def test_declining_sends_nothing_but_keeps_the_randomized_answers(runner, live_server, client,
                                                                  auth, health_id):
    result = runner.invoke(main, ["respond", "--url", live_server, "--survey", health_id,
                                  "--answers", ANSWERS], input="n\n")
    assert result.exit_code == 0 and "Not sent" in result.stdout
    assert responses(client, auth, health_id) == 0
    sent_first = result.stdout.split("exactly what will be sent")[1].splitlines()[1]
    later = runner.invoke(main, ["respond", "--url", live_server, "--survey", health_id, "--yes"])
    assert later.stdout.split("exactly what will be sent")[1].splitlines()[1] == sent_first
    assert "did not send it" in later.stdout and "already sent" not in later.stdout


def test_refuses_above_the_ceiling(runner, live_server, client, auth, health_id):
    result = runner.invoke(main, ["respond", "--url", live_server, "--survey", health_id,
                                  "--max-epsilon", "0.5", "--answers", ANSWERS, "--yes"])
    assert result.exit_code == 1
    assert "not answering" in result.stderr and "above your ceiling of 0.5" in result.stderr
    assert responses(client, auth, health_id) == 0


@pytest.mark.parametrize("answers, message", [
    ("smoked=perhaps", "takes yes or no"),
    ("nosuch=1", "no question 'nosuch'"),
    ("smoked", "expected question=answer"),
])
def test_bad_answers_option(runner, live_server, health_id, answers, message):
    result = runner.invoke(main, ["respond", "--url", live_server, "--survey", health_id,
                                  "--answers", answers, "--yes"])
    assert result.exit_code == 2 and message in result.stderr


def test_the_release_batch_is_shown_as_the_servers_promise(runner, live_server, client, auth):
    definition = {**read_definition(resources.files("ldpsurvey.shared") / "examples" /
                                    "health.toml"), "release_batch": 250}
    survey_id = client.post("/api/surveys", json=definition, headers=auth).json["survey_id"]
    plain = runner.invoke(main, ["respond", "--url", live_server, "--survey", survey_id,
                                 "--answers", ANSWERS])  # declined: answered again below
    assert release_summary(250) in plain.stdout and "submissions have arrived" not in plain.stdout
    assert OPEN_NOT_MIXED not in plain.stdout  # no open question: the mixing hides them all
    result = runner.invoke(main, ["respond", "--url", live_server, "--survey", survey_id,
                                  "--yes", "--details"])
    assert result.exit_code == 0, result.output
    assert "until at least 250 submissions have arrived" in result.stdout
    assert "This is the server's promise: your device cannot check it." in result.stdout


# --- the ledger, links and what respondents are told (issue 13) ----------------------------


def three_at_ln_3(client, auth) -> str:
    definition = {"title": "Three at ln 3", "release_batch": 1, "questions": [
        {"id": f"q{i}", "text": f"Question {i}?", "type": "yes_no", "epsilon": math.log(3)}
        for i in range(3)]}
    return client.post("/api/surveys", json=definition, headers=auth).json["survey_id"]


def test_averaging_through_url_spellings_sends_one_body_counted_once(runner, live_server, client,
                                                                     auth, health_id):
    """The attack: answer the same survey again and again, each time through another spelling
    of the address (and changing the true answers), hoping each run randomizes afresh. The
    spellings of the signed origin send one body; another origin (localhost) is refused."""
    port = live_server.rsplit(":", 1)[1]
    spellings = [live_server, f"HTTP://127.0.0.1:{port}//", f"http://127.1:{port}/",
                 f"http://0x7f.0.0.1:{port}", f"http://2130706433:{port}",
                 f"http://127.0.0.1:{port}/s/{health_id}"]
    bodies = []
    for run, url in enumerate(spellings):
        truth = "yes" if run % 2 else "no"
        result = runner.invoke(main, ["respond", "--url", url, "--survey", health_id, "--answers",
                                      f"smoked={truth},drank_and_drove={truth},cannabis={truth},"
                                      f"sleep={run % 3}", "--yes", "--details"])
        assert result.exit_code == 0, result.output
        bodies.append(sent_body(result.stdout))
    assert all(body == bodies[0] for body in bodies)
    for url in (f"http://LoCaLhost:{port}/", f"http://LOCALHOST:{port}/s/{health_id}/"):
        refused = runner.invoke(main, ["respond", "--url", url, "--survey", health_id,
                                       "--answers", "smoked=yes,drank_and_drove=yes,"
                                       "cannabis=yes,sleep=1", "--yes"])
        assert refused.exit_code == 1
        assert f"signed for {live_server} but was fetched from http://localhost:{port}" in \
            refused.stderr
    assert responses(client, auth, health_id) == 1
    ledger = json.loads(runner.invoke(main, ["privacy", "--json"]).stdout)
    [aggregator] = ledger["aggregators"]
    assert aggregator["urls"] == [f"http://127.0.0.1:{port}"]
    assert [s["survey_id"] for s in aggregator["surveys"]] == [health_id]  # charged once


def test_the_third_survey_at_3_ln_3_is_refused_under_the_default_lifetime_budget(
        runner, live_server, client, auth):
    answers = "q0=yes,q1=no,q2=yes"
    for _ in range(2):
        result = runner.invoke(main, ["respond", "--url", live_server, "--survey",
                                      three_at_ln_3(client, auth), "--answers", answers, "--yes"])
        assert result.exit_code == 0, result.output
    third = three_at_ln_3(client, auth)
    refused = runner.invoke(main, ["respond", "--url", live_server, "--survey", third,
                                   "--answers", answers, "--yes"])
    assert refused.exit_code == 1
    assert "above your lifetime budget of 8.79" in refused.stderr
    assert "Nothing was sent" in refused.stderr and "[q0]" not in refused.stdout
    assert responses(client, auth, third) == 0
    # a respondent who decides to allow more may answer it
    allowed = runner.invoke(main, ["respond", "--url", live_server, "--survey", third,
                                   "--answers", answers, "--yes", "--max-lifetime-epsilon", "10"])
    assert allowed.exit_code == 0 and responses(client, auth, third) == 1


def test_privacy_json_lists_each_key_its_urls_and_surveys(runner, live_server, client, auth,
                                                          health_id):
    declined = three_at_ln_3(client, auth)
    runner.invoke(main, ["respond", "--url", live_server, "--survey", health_id, "--answers",
                         ANSWERS, "--yes"])
    runner.invoke(main, ["respond", "--url", live_server, "--survey", declined, "--answers",
                         "q0=yes,q1=no,q2=yes"], input="n\n")  # prepared, never sent
    result = runner.invoke(main, ["privacy", "--json"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert list(document) == ["device", "aggregators"]
    total = client.get(f"/api/surveys/{health_id}").json["total_epsilon"]
    assert document["device"] == {"epsilon_spent": pytest.approx(total),
                                  "epsilon_remaining": pytest.approx(8 * math.log(3) - total),
                                  "lifetime_limit": pytest.approx(8 * math.log(3)),
                                  "aggregator_limit": None, "forgotten": 0.0}
    [aggregator] = document["aggregators"]
    assert list(aggregator) == ["key_id", "urls", "epsilon_spent", "epsilon_remaining", "surveys"]
    assert aggregator["key_id"] == client.get("/api/key").json["key_id"]
    assert aggregator["urls"] == [live_server]
    assert aggregator["surveys"] == [{"survey_id": health_id, "title": "Health and habits",
                                      "epsilon": pytest.approx(total),
                                      "disclosed": pytest.approx(total), "sent": True}]
    assert aggregator["epsilon_spent"] == pytest.approx(total)
    assert aggregator["epsilon_remaining"] == pytest.approx(8 * math.log(3) - total)
    table = runner.invoke(main, ["privacy"]).stdout
    assert aggregator["key_id"] in table and health_id in table and declined not in table


def test_forget_says_what_is_lost_and_then_answers_randomize_afresh(runner, live_server, client,
                                                                    auth, health_id):
    runner.invoke(main, ["respond", "--url", live_server, "--survey", health_id, "--answers",
                         ANSWERS, "--yes"])
    kid = client.get("/api/key").json["key_id"]
    kept = runner.invoke(main, ["privacy", "--forget", kid], input="n\n")
    assert kept.exit_code == 1 and "spend budget again" in kept.stdout
    assert json.loads(runner.invoke(main, ["privacy", "--json"]).stdout)["aggregators"]
    gone = runner.invoke(main, ["privacy", "--forget", kid], input="y\n")
    assert gone.exit_code == 0 and "Forgotten" in gone.stdout
    after = json.loads(runner.invoke(main, ["privacy", "--json"]).stdout)
    total = client.get(f"/api/surveys/{health_id}").json["total_epsilon"]
    assert after["aggregators"] == [] and after["device"]["forgotten"] == pytest.approx(total)
    assert after["device"]["epsilon_spent"] == pytest.approx(total)  # no budget given back
    unknown = runner.invoke(main, ["privacy", "--forget", kid])
    assert unknown.exit_code == 2 and "keeps nothing for key" in unknown.stderr
    again = runner.invoke(main, ["respond", "--url", live_server, "--survey", health_id],
                          input="yes\nno\nno\n1\n\nn\n")
    assert "First use of" in again.stdout and "Your answer" in again.stdout


def invitation(client, auth) -> tuple[str, str]:
    definition = {**read_definition(resources.files("ldpsurvey.shared") / "examples" /
                                    "health.toml"), "release_batch": 1, "invitation_only": True}
    survey_id = client.post("/api/surveys", json=definition, headers=auth).json["survey_id"]
    tokens = client.post(f"/api/surveys/{survey_id}/tokens", json={"count": 1}, headers=auth)
    return survey_id, tokens.json["tokens"][0]


def test_the_invitation_link_as_url(runner, live_server, client, auth):
    survey_id, token = invitation(client, auth)
    result = runner.invoke(main, ["respond", "--url", f"{live_server}/s/{survey_id}#t={token}",
                                  "--answers", ANSWERS, "--yes"])
    assert result.exit_code == 0, result.output
    assert responses(client, auth, survey_id) == 1


def test_the_invitation_link_at_a_prompt_is_not_echoed(runner, live_server, client, auth):
    survey_id, token = invitation(client, auth)
    result = runner.invoke(main, ["respond", "--link", "--answers", ANSWERS, "--yes"],
                           input=f"{live_server}/s/{survey_id}#t={token}\n")
    assert result.exit_code == 0, result.output
    assert "Survey link" in result.stdout and token not in result.output
    assert responses(client, auth, survey_id) == 1


def test_a_spent_invitation_is_reported_at_send_in_plain_words(runner, live_server, client,
                                                               auth, tmp_path, monkeypatch):
    survey_id, token = invitation(client, auth)
    link = f"{live_server}/s/{survey_id}#t={token}"
    runner.invoke(main, ["respond", "--url", link, "--answers", ANSWERS, "--yes"])
    monkeypatch.setenv("LDP_SURVEY_CLIENT_DIR", str(tmp_path / "another-device"))
    result = runner.invoke(main, ["respond", "--url", link, "--answers", ANSWERS, "--yes"])
    assert result.exit_code == 1
    assert "did not accept this invitation: it is unknown or was already used" in result.stderr
    assert responses(client, auth, survey_id) == 1


def test_status_and_invitation_are_checked_before_any_question(runner, live_server, client,
                                                               auth, health_id):
    client.post(f"/api/surveys/{health_id}/close", headers=auth)
    closed = runner.invoke(main, ["respond", "--url", live_server, "--survey", health_id])
    assert closed.exit_code == 1 and "this survey is closed" in closed.stderr
    assert "Your answer" not in closed.output and "[smoked]" not in closed.output
    survey_id, _ = invitation(client, auth)
    uninvited = runner.invoke(main, ["respond", "--url", live_server, "--survey", survey_id])
    assert uninvited.exit_code == 1 and "by invitation only" in uninvited.stderr
    assert "[smoked]" not in uninvited.output


def test_a_network_failure_says_the_answers_are_kept_and_a_rerun_sends_them(
        runner, live_server, client, auth, health_id, monkeypatch):
    from ldpsurvey.client import http

    real = http.request

    def no_post(method, url, **kwargs):  # the network fails for the send only
        if method == "POST":
            raise http.NetworkError(f"could not reach {url}: connection reset")
        return real(method, url, **kwargs)

    monkeypatch.setattr(http, "request", no_post)
    failed = runner.invoke(main, ["respond", "--url", live_server, "--survey", health_id,
                                  "--answers", ANSWERS, "--yes", "--details"])
    assert failed.exit_code == 1
    assert "Your randomized answers are kept: running the same command again sends them" in \
        failed.stderr
    monkeypatch.setattr(http, "request", real)
    again = runner.invoke(main, ["respond", "--url", live_server, "--survey", health_id, "--yes",
                                 "--details"])
    assert again.exit_code == 0, again.output
    assert "without confirmation that it arrived" in again.stdout
    assert sent_body(again.stdout) == sent_body(failed.stdout)
    assert responses(client, auth, health_id) == 1


def test_first_use_names_the_pinned_key_and_a_changed_key_names_the_ways_out(
        runner, live_server, client, auth, health_id, tmp_path):
    kid = client.get("/api/key").json["key_id"]
    first = runner.invoke(main, ["respond", "--url", live_server, "--survey", health_id,
                                 "--answers", ANSWERS], input="n\n")
    assert f"this device now trusts its signing key {kid}" in first.stdout
    second = runner.invoke(main, ["respond", "--url", live_server, "--survey", health_id],
                           input="n\n")
    assert "First use" not in second.stdout
    state = json.loads((tmp_path / "respondent" / "state.json").read_text())
    state["pins"][live_server] = base64.b64encode(b"\x01" * 32).decode()  # another key
    (tmp_path / "respondent" / "state.json").write_text(json.dumps(state))
    changed = runner.invoke(main, ["respond", "--url", live_server, "--survey", health_id])
    assert changed.exit_code == 1 and "different signing key" in changed.stderr
    assert "--public-key" in changed.stderr and "ldp-survey privacy --forget" in changed.stderr


def test_why_an_answer_may_differ_is_on_the_review_screen(runner, live_server, health_id):
    from ldpsurvey.client import WHY_IT_MAY_DIFFER

    result = runner.invoke(main, ["respond", "--url", live_server, "--survey", health_id,
                                  "--answers", ANSWERS], input="n\n")
    review = result.stdout.split("exactly what will be sent")[1]
    assert WHY_IT_MAY_DIFFER in review


def test_survey_texts_are_shown_without_invisible_characters(runner, live_server, client, auth):
    """What publishing allows but a terminal would not show is left out (a zero-width space)
    or shown as a space (a line separator)."""
    definition = {"title": "Sneaky\u200b title", "release_batch": 1, "questions": [
        {"id": "q", "text": "Line\u2028break?", "type": "choice", "options": ["a\u200b", "b"],
         "alpha": 0.3}]}
    survey_id = client.post("/api/surveys", json=definition, headers=auth).json["survey_id"]
    result = runner.invoke(main, ["respond", "--url", live_server, "--survey", survey_id,
                                  "--answers", "q=1"], input="n\n")
    assert result.exit_code == 0, result.output
    assert "Sneaky title" in result.stdout and "Line break?" in result.stdout
    assert "0) a  1) b" in result.stdout
    assert all(c.isprintable() or c == "\n" for c in result.stdout)


@pytest.mark.parametrize("field, where", [
    ({"title": "Habits\x1b]0;pwned\x07"}, "survey.title"),
    ({"description": "Read this \u202eright to left"}, "survey.description"),
])
def test_control_characters_are_refused_at_publish(client, auth, field, where):
    definition = {**read_definition(resources.files("ldpsurvey.shared") / "examples" /
                                    "health.toml"), **field}
    response = client.post("/api/surveys", json=definition, headers=auth)
    assert response.status_code == 422, response.json
    assert response.json["detail"].startswith(f"{where}: holds the control or bidirectional")


def test_control_characters_in_questions_and_options_are_refused_at_publish(client, auth):
    questions = [{"id": "q", "text": "Fine?", "type": "choice", "options": ["ok", "no\x9b2J"],
                  "alpha": 0.3}]
    response = client.post("/api/surveys", json={"title": "t", "questions": questions},
                           headers=auth)
    assert response.status_code == 422
    assert "question 'q'.options[1]: holds the control or bidirectional character U+009B" in \
        response.json["detail"]


OPEN = OPEN_AND_HIDDEN


def test_open_questions_are_marked_sent_as_given_and_charged_nothing(runner, live_server,
                                                                     client, auth):
    """respond marks each open question (and only those) in plain words, says first which
    answers are sent as given, bounds the randomized one alone, sends the open answers
    unchanged, and the ledger charges the randomized question's epsilon only."""
    from ldpsurvey.client import OPEN_INTRO
    from ldpsurvey.shared.mechanisms.disclosed import WORDS

    survey_id = client.post("/api/surveys", json=OPEN, headers=auth).json["survey_id"]
    manifest = client.get(f"/api/surveys/{survey_id}").json
    refused = runner.invoke(main, ["respond", "--url", live_server, "--survey", survey_id,
                                   "--answers", "age=17,sex=male,smoked=yes", "--yes"])
    assert refused.exit_code != 0 and "a whole number from 18 to 99" in refused.output
    result = runner.invoke(main, ["respond", "--url", live_server, "--survey", survey_id,
                                  "--answers", "age=42,sex=Male,smoked=yes", "--yes",
                                  "--details"])
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert OPEN_INTRO in out and bound_note([manifest["questions"][2]["epsilon"]]) in out
    blocks = {q: out.split(f"[{q}] ")[1].split("\n[")[0] for q in ("age", "sex", "smoked")}
    assert WORDS in blocks["age"] and WORDS in blocks["sex"] and WORDS not in blocks["smoked"]
    body = sent_body(out)["answers"]
    assert (body["age"], body["sex"]) == (42, 1) and body["smoked"] in (0, 1)
    assert "[age] 42 years" in out.split("exactly what will be sent")[1]
    assert "never left this device, except those you gave openly" in out
    privacy = json.loads(runner.invoke(main, ["privacy", "--json"]).stdout)
    [sent] = privacy["aggregators"][0]["surveys"]
    assert sent["epsilon"] == pytest.approx(manifest["questions"][2]["epsilon"])
    assert manifest["total_epsilon"] == pytest.approx(manifest["questions"][2]["epsilon"])
    assert privacy["device"]["epsilon_spent"] == pytest.approx(sent["epsilon"])
    released_n(client, auth, survey_id)
    export = client.get(f"/api/surveys/{survey_id}/export.jsonl", headers=auth).text
    [row] = [json.loads(line) for line in export.splitlines()[1:]]
    assert (row["answers"]["age"], row["answers"]["sex"]) == (42, 1)


def test_a_survey_without_open_questions_keeps_the_first_words(runner, live_server, health_id):
    from ldpsurvey.shared.mechanisms.disclosed import WORDS

    result = runner.invoke(main, ["respond", "--url", live_server, "--survey", health_id,
                                  "--answers", ANSWERS, "--yes"])
    assert result.exit_code == 0, result.output
    assert INTRO in result.stdout and WORDS not in result.stdout
    assert "Your real answers never left this device.\n" in result.stdout


def test_typed_open_answers_are_asked_as_whole_numbers_and_reviewed_as_leaving_the_device(
        runner, live_server, client, auth):
    """At the prompt an open number out of range or not whole is asked again; the review says
    that the open answers leave the device as they are (the randomized ones never do)."""
    survey_id = client.post("/api/surveys", json=OPEN, headers=auth).json["survey_id"]
    result = runner.invoke(main, ["respond", "--url", live_server, "--survey", survey_id],
                           input="17\n42.5\n42\nfemale\nno\n\ny\n")
    assert result.exit_code == 0, result.output
    assert result.output.count("takes a whole number from 18 to 99") == 2
    review = result.output.split("Your answers, before the coin flips")[1]
    assert "only those marked as answered openly leave this device as they are" in review
    assert "[age] 42 years" in review
    assert released_n(client, auth, survey_id) == 1


def test_with_open_answers_the_release_words_do_not_promise_they_are_hidden(runner, live_server,
                                                                            client, auth):
    """Released in groups of 50, an open answer can still single its response out of the
    group: respond says so beside the mixing (and without open questions it does not)."""
    survey_id = client.post("/api/surveys", json={**OPEN, "release_batch": 50},
                            headers=auth).json["survey_id"]
    shown = runner.invoke(main, ["respond", "--url", live_server, "--survey", survey_id,
                                 "--answers", "age=42,sex=Male,smoked=yes"])  # declined
    assert release_summary(50, True) in shown.stdout and OPEN_NOT_MIXED in shown.stdout


@pytest.mark.parametrize(("qid", "typed", "truth"), [
    ("smoked", "yes", 1), ("smoked", "No", 0), ("sleep", "2", 2), ("sleep", "over 8 HOURS", 2),
    ("fruit", "0", 0), ("sports", "0;Cycling", [0, 2]), ("sports", "none", []),
    ("glasses", "6.5", 6.5), ("age", "40", 40), ("region", "East", 2)])
def test_answers_name_an_option_by_its_number_from_0_or_its_text(qid, typed, truth):
    """docs/respondents.md: `--answers` takes yes or no, an option by its number counted from 0
    (as the prompt lists them) or its text, a check-all question's options separated by ';'
    (or none), and a number as typed."""
    from ldpsurvey.shared import parse_definition

    from helpers import EVERY_TYPE

    assert parse_definition(EVERY_TYPE).question(qid).scheme.parse_text(typed) == truth
