# mixed: one round of every channel the issue names. Sourced by /init,
# which defines op (run, mark, report) and id (a fresh message or event id).
C=chipset
R1=$(id); op send-request $C mail send --from critic --to exec --kind request --subject review-1 --task t1 --expects-reply --body "please review part 1" --id $R1
op hook-assign $C hook assign w1 --bead b1 --title "part one" --by mayor
op hook-activate $C hook activate w1
E1=$(id); op bus-publish $C bus publish --to w1 --source ci --kind build-failed --priority high --payload '{"run":1}' --id $E1
op send-notify-big $C mail send --from mayor --to w1 --kind notify --subject fyi --task t1 --body-file /data/body-100k.txt
op hook-touch $C hook touch w1
R2=$(id); op send-request $C mail send --from critic --to exec --kind request --subject review-2 --task t1 --expects-reply --body "and part 2" --id $R2
op send-response $C mail send --from exec --to critic --kind response --subject review-1 --task t1 --in-reply-to $R1 --body "part 1 is fine"
op batch-20 /bin/send_batch $CHIPSET_ROOT 20
E2=$(id); op bus-publish $C bus publish --to w1 --source ci --kind build-passed --dedup-key build --id $E2
op bus-ack $C bus ack w1 $E1
op hook-complete $C hook complete w1
op send-response $C mail send --from exec --to critic --kind response --subject review-2 --task t1 --in-reply-to $R2 --body "part 2 is fine"
op sweep $C mail sweep t1
op hook-clear $C hook clear w1
op nudge-send $C nudge send --from mayor --to w1 --type priority_change --message "next: t2"
op remind-open $C remind open --kind spec_draft --source-type spec --source-id t2 --message "review t2" --agent critic
op hook-assign $C hook assign w1 --bead b2 --title "part two" --by mayor
op bus-ack $C bus ack w1 $E2
op mail-archive $C mail archive $R1
